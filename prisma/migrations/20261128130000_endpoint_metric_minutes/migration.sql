-- Per-endpoint metrics (domain/metrics, docs/metrics.md): one row per endpoint and minute, rolled up
-- once by the rollup-endpoint-metrics schedule and kept 7 days; the rollup's progress row; the index
-- it finds the jobs that ended in a minute by (partial: jobs not ended cost it nothing); and the
-- worker's first readiness, which a FlashBoot thaw would otherwise overwrite.
-- AlterTable
ALTER TABLE "Worker" ADD COLUMN     "firstReadyAt" TIMESTAMP(3);

-- CreateTable
CREATE TABLE "EndpointMetricMinute" (
    "endpointId" TEXT NOT NULL,
    "minute" TIMESTAMP(3) NOT NULL,
    "completed" INTEGER NOT NULL DEFAULT 0,
    "failed" INTEGER NOT NULL DEFAULT 0,
    "timedOut" INTEGER NOT NULL DEFAULT 0,
    "cancelled" INTEGER NOT NULL DEFAULT 0,
    "executionCount" INTEGER NOT NULL DEFAULT 0,
    "executionSumMs" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "executionHist" INTEGER[] DEFAULT ARRAY[]::INTEGER[],
    "delayCount" INTEGER NOT NULL DEFAULT 0,
    "delaySumMs" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "delayHist" INTEGER[] DEFAULT ARRAY[]::INTEGER[],
    "coldStarts" INTEGER NOT NULL DEFAULT 0,
    "coldStartSumMs" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "coldStartMaxMs" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "thaws" INTEGER NOT NULL DEFAULT 0,
    "pendingSeconds" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "initializingSeconds" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "idleSeconds" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "runningSeconds" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "unhealthySeconds" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "standbySeconds" DOUBLE PRECISION NOT NULL DEFAULT 0,

    CONSTRAINT "EndpointMetricMinute_pkey" PRIMARY KEY ("endpointId","minute")
);

-- CreateTable
CREATE TABLE "MetricRollupState" (
    "id" INTEGER NOT NULL,
    "rolledUntil" TIMESTAMP(3) NOT NULL,
    "sampledAt" TIMESTAMP(3),

    CONSTRAINT "MetricRollupState_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "EndpointMetricMinute_minute_idx" ON "EndpointMetricMinute"("minute");

-- CreateIndex
CREATE INDEX "Job_completedAt_idx" ON "Job"("completedAt") WHERE ("completedAt" IS NOT NULL);

-- AddForeignKey
ALTER TABLE "EndpointMetricMinute" ADD CONSTRAINT "EndpointMetricMinute_endpointId_fkey" FOREIGN KEY ("endpointId") REFERENCES "Endpoint"("id") ON DELETE CASCADE ON UPDATE CASCADE;
