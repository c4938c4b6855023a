-- AlterTable
ALTER TABLE "AppEnvironment" ADD COLUMN     "sourceBlobKey" TEXT,
ADD COLUMN     "sourceSha256" TEXT,
ADD COLUMN     "sourceVersion" INTEGER NOT NULL DEFAULT 0;
