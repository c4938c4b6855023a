-- AlterTable
ALTER TABLE "Host" ADD COLUMN     "gpuMethod" TEXT,
ADD COLUMN     "lastSeenAt" TIMESTAMP(3),
ADD COLUMN     "maxWorkers" INTEGER,
ADD COLUMN     "probe" JSONB,
ADD COLUMN     "source" TEXT NOT NULL DEFAULT 'api';
