-- CreateTable
CREATE TABLE "LbProxyLoad" (
    "processId" TEXT NOT NULL,
    "endpointId" TEXT NOT NULL,
    "workerId" TEXT NOT NULL,
    "inFlight" INTEGER NOT NULL DEFAULT 0,
    "routable" BOOLEAN NOT NULL DEFAULT false,
    "waitingSince" TIMESTAMP(3),
    "lastActiveAt" TIMESTAMP(3),
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "LbProxyLoad_pkey" PRIMARY KEY ("processId","endpointId","workerId")
);

-- CreateIndex
CREATE INDEX "LbProxyLoad_endpointId_idx" ON "LbProxyLoad"("endpointId");

-- CreateIndex
CREATE INDEX "LbProxyLoad_workerId_idx" ON "LbProxyLoad"("workerId");
