-- FlashBoot standby workers (workflows/worker.ts): an idle worker's container frozen on its host,
-- thawed when its endpoint scales up again. Standby time is not billed.
ALTER TYPE "WorkerStatus" ADD VALUE 'STANDBY';

ALTER TABLE "Worker" ADD COLUMN "standbySince" TIMESTAMP(3),
ADD COLUMN "standbySeconds" DOUBLE PRECISION NOT NULL DEFAULT 0;
