-- Idempotent submits (docs/jobs.md): a client's Idempotency-Key is stored with the job it created, in
-- the same INSERT, with the SHA-256 of that request. The unique index is partial, so that a job
-- submitted without a key (almost all of them) adds no index entry.
ALTER TABLE "Job" ADD COLUMN "idempotencyHash" BYTEA,
ADD COLUMN "idempotencyKey" TEXT;

CREATE UNIQUE INDEX "Job_accountId_endpointId_idempotencyKey_key" ON "Job"("accountId", "endpointId", "idempotencyKey") WHERE ("idempotencyKey" IS NOT NULL);
