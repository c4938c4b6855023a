-- GET /health counts that never go down: the retention sweep adds the finished jobs it deletes to
-- per-endpoint, per-account totals in the same statement (domain/jobs/queue-supervision.ts).
-- CreateTable
CREATE TABLE "EndpointJobTotals" (
    "endpointId" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "completed" BIGINT NOT NULL DEFAULT 0,
    "failed" BIGINT NOT NULL DEFAULT 0,
    "retried" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "EndpointJobTotals_pkey" PRIMARY KEY ("endpointId","accountId")
);

-- AddForeignKey
ALTER TABLE "EndpointJobTotals" ADD CONSTRAINT "EndpointJobTotals_endpointId_fkey" FOREIGN KEY ("endpointId") REFERENCES "Endpoint"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "EndpointJobTotals" ADD CONSTRAINT "EndpointJobTotals_accountId_fkey" FOREIGN KEY ("accountId") REFERENCES "Account"("id") ON DELETE CASCADE ON UPDATE CASCADE;
