-- AlterTable
ALTER TABLE "Worker" ADD COLUMN     "healthFailingSince" TIMESTAMP(3);
