-- CreateEnum
CREATE TYPE "PublicModelOutputKind" AS ENUM ('IMAGE', 'VIDEO', 'AUDIO', 'JSON');

-- CreateEnum
CREATE TYPE "PublicModelPriceUnit" AS ENUM ('CALL', 'MEGAPIXEL', 'SECOND');

-- AlterTable
ALTER TABLE "Job" ADD COLUMN     "modelId" TEXT;

-- CreateTable
CREATE TABLE "PublicModel" (
    "id" TEXT NOT NULL,
    "endpointId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "outputKind" "PublicModelOutputKind" NOT NULL,
    "inputSchema" JSON NOT NULL,
    "priceAmount" DOUBLE PRECISION NOT NULL,
    "priceUnit" "PublicModelPriceUnit" NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "PublicModel_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "PublicModelCharge" (
    "jobId" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "modelId" TEXT NOT NULL,
    "units" DOUBLE PRECISION NOT NULL,
    "amount" DOUBLE PRECISION NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "PublicModelCharge_pkey" PRIMARY KEY ("jobId")
);

-- CreateTable
CREATE TABLE "OutputObject" (
    "id" TEXT NOT NULL,
    "jobId" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "blobKey" TEXT NOT NULL,
    "contentType" TEXT NOT NULL,
    "fileName" TEXT NOT NULL,
    "size" INTEGER NOT NULL DEFAULT 0,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "OutputObject_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "PublicModel_endpointId_key" ON "PublicModel"("endpointId");

-- CreateIndex
CREATE INDEX "PublicModelCharge_accountId_createdAt_idx" ON "PublicModelCharge"("accountId", "createdAt");

-- CreateIndex
CREATE INDEX "OutputObject_expiresAt_idx" ON "OutputObject"("expiresAt");

-- AddForeignKey
ALTER TABLE "PublicModel" ADD CONSTRAINT "PublicModel_endpointId_fkey" FOREIGN KEY ("endpointId") REFERENCES "Endpoint"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "PublicModelCharge" ADD CONSTRAINT "PublicModelCharge_accountId_fkey" FOREIGN KEY ("accountId") REFERENCES "Account"("id") ON DELETE CASCADE ON UPDATE CASCADE;
