-- AlterTable
ALTER TABLE "Job" ADD COLUMN     "signalDueAt" TIMESTAMP(3);
