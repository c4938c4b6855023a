-- AlterTable
ALTER TABLE "Job" ADD COLUMN     "lastSeenAt" TIMESTAMP(3),
ADD COLUMN     "seq" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "stopDeliveredAt" TIMESTAMP(3),
ADD COLUMN     "stopRequestedAt" TIMESTAMP(3),
ADD COLUMN     "streamTotal" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "webhookAttempts" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "webhookDeliveredAt" TIMESTAMP(3);

-- CreateIndex
CREATE INDEX "Job_status_startedAt_idx" ON "Job"("status", "startedAt");
