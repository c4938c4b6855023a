-- CreateEnum
CREATE TYPE "ApiKeyScope" AS ENUM ('READ', 'WRITE', 'RUN', 'ADMIN');

-- CreateEnum
CREATE TYPE "EndpointType" AS ENUM ('QUEUE_BASED', 'LOAD_BALANCING');

-- CreateEnum
CREATE TYPE "ScalerType" AS ENUM ('QUEUE_DELAY', 'REQUEST_COUNT');

-- CreateEnum
CREATE TYPE "FlashBoot" AS ENUM ('OFF', 'FLASHBOOT', 'PRIORITY_FLASHBOOT');

-- CreateEnum
CREATE TYPE "ReleaseStatus" AS ENUM ('ROLLING_OUT', 'COMPLETED', 'HALTED', 'ROLLED_BACK', 'SUPERSEDED');

-- CreateEnum
CREATE TYPE "DesiredStatus" AS ENUM ('RUNNING', 'EXITED', 'TERMINATED');

-- CreateEnum
CREATE TYPE "HostStatus" AS ENUM ('PENDING', 'READY', 'UNREACHABLE', 'HOST_KEY_MISMATCH', 'DISABLED');

-- CreateEnum
CREATE TYPE "WorkerStatus" AS ENUM ('PENDING', 'INITIALIZING', 'IDLE', 'RUNNING', 'UNHEALTHY', 'DRAINING', 'STOPPED', 'FAILED');

-- CreateEnum
CREATE TYPE "JobStatus" AS ENUM ('IN_QUEUE', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT');

-- CreateTable
CREATE TABLE "Account" (
    "id" TEXT NOT NULL,
    "email" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "isAdmin" BOOLEAN NOT NULL DEFAULT false,
    "serverlessDiscountFactor" DOUBLE PRECISION,
    "serverlessDiscountType" TEXT,
    "serverlessDiscountExpires" TIMESTAMP(3),
    "rateLimitPerMinute" INTEGER,
    "rateLimitPerHour" INTEGER,
    "rateLimitPerDay" INTEGER,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Account_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ApiKey" (
    "id" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "hash" TEXT NOT NULL,
    "scopes" "ApiKeyScope"[],
    "endpointIds" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "expiresAt" TIMESTAMP(3),
    "revokedAt" TIMESTAMP(3),
    "lastUsedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ApiKey_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "RateLimitCounter" (
    "accountId" TEXT NOT NULL,
    "window" TEXT NOT NULL,
    "windowStart" TIMESTAMP(3) NOT NULL,
    "count" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "RateLimitCounter_pkey" PRIMARY KEY ("accountId","window","windowStart")
);

-- CreateTable
CREATE TABLE "Endpoint" (
    "id" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "type" "EndpointType" NOT NULL DEFAULT 'QUEUE_BASED',
    "image" TEXT NOT NULL,
    "args" TEXT NOT NULL DEFAULT '',
    "disk" INTEGER NOT NULL DEFAULT 10,
    "ports" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "env" JSONB NOT NULL DEFAULT '{}',
    "registryId" TEXT,
    "gpuPools" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "gpuCount" INTEGER,
    "cpuFlavorId" TEXT,
    "cpuVcpuCount" INTEGER,
    "cpuMemoryGb" INTEGER,
    "workersMin" INTEGER NOT NULL DEFAULT 0,
    "workersMax" INTEGER NOT NULL DEFAULT 3,
    "scalerType" "ScalerType" NOT NULL DEFAULT 'QUEUE_DELAY',
    "scalerValue" DOUBLE PRECISION NOT NULL DEFAULT 4,
    "idleTimeout" INTEGER NOT NULL DEFAULT 5,
    "dataCenterIds" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "networkVolumeIds" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "timeoutMs" INTEGER NOT NULL DEFAULT 600000,
    "flashboot" "FlashBoot" NOT NULL DEFAULT 'OFF',
    "templateId" TEXT,
    "locations" TEXT NOT NULL DEFAULT '',
    "currentReleaseVersion" INTEGER NOT NULL DEFAULT 1,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    "deletingAt" TIMESTAMP(3),

    CONSTRAINT "Endpoint_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Release" (
    "id" TEXT NOT NULL,
    "endpointId" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "image" TEXT NOT NULL,
    "args" TEXT NOT NULL,
    "disk" INTEGER NOT NULL,
    "ports" TEXT[],
    "env" JSONB NOT NULL,
    "registryId" TEXT,
    "changes" JSONB NOT NULL DEFAULT '[]',
    "status" "ReleaseStatus" NOT NULL DEFAULT 'ROLLING_OUT',
    "statusReason" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finishedAt" TIMESTAMP(3),

    CONSTRAINT "Release_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Template" (
    "id" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "imageName" TEXT NOT NULL,
    "dockerArgs" TEXT NOT NULL DEFAULT '',
    "containerDiskInGb" INTEGER NOT NULL DEFAULT 10,
    "volumeInGb" INTEGER NOT NULL DEFAULT 0,
    "volumeMountPath" TEXT NOT NULL DEFAULT '/workspace',
    "env" JSONB NOT NULL DEFAULT '{}',
    "ports" TEXT NOT NULL DEFAULT '',
    "isServerless" BOOLEAN NOT NULL DEFAULT true,
    "readme" TEXT NOT NULL DEFAULT '',
    "registryId" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Template_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "RegistryCredential" (
    "id" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "secret" BYTEA NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "RegistryCredential_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "NetworkVolume" (
    "id" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "size" INTEGER NOT NULL,
    "dataCenterId" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "NetworkVolume_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Pod" (
    "id" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "imageName" TEXT NOT NULL,
    "dockerArgs" TEXT NOT NULL DEFAULT '',
    "containerDiskInGb" INTEGER NOT NULL DEFAULT 10,
    "volumeInGb" INTEGER NOT NULL DEFAULT 0,
    "env" JSONB NOT NULL DEFAULT '{}',
    "ports" TEXT NOT NULL DEFAULT '',
    "gpuTypeId" TEXT,
    "gpuCount" INTEGER NOT NULL DEFAULT 0,
    "templateId" TEXT,
    "registryId" TEXT,
    "desiredStatus" "DesiredStatus" NOT NULL DEFAULT 'RUNNING',
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Pod_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Host" (
    "id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "address" TEXT NOT NULL,
    "port" INTEGER NOT NULL DEFAULT 22,
    "user" TEXT NOT NULL,
    "privateKey" BYTEA,
    "useAgent" BOOLEAN NOT NULL DEFAULT false,
    "dataCenterId" TEXT NOT NULL,
    "labels" JSONB NOT NULL DEFAULT '{}',
    "hostKeySha256" TEXT,
    "status" "HostStatus" NOT NULL DEFAULT 'PENDING',
    "statusReason" TEXT,
    "cpuCount" INTEGER,
    "memoryMb" INTEGER,
    "diskFreeGb" INTEGER,
    "containerRuntime" TEXT,
    "gpuPassthrough" BOOLEAN NOT NULL DEFAULT false,
    "gpus" JSONB NOT NULL DEFAULT '[]',
    "lastProbeAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Host_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Worker" (
    "id" TEXT NOT NULL,
    "endpointId" TEXT,
    "podId" TEXT,
    "releaseVersion" INTEGER NOT NULL DEFAULT 1,
    "hostId" TEXT,
    "gpuUuids" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "gpuTypeId" TEXT,
    "cpuFlavorId" TEXT,
    "status" "WorkerStatus" NOT NULL DEFAULT 'PENDING',
    "desiredStatus" "DesiredStatus" NOT NULL DEFAULT 'RUNNING',
    "statusReason" TEXT,
    "containerName" TEXT,
    "containerId" TEXT,
    "hostPort" INTEGER,
    "credentialHash" TEXT,
    "lastPingAt" TIMESTAMP(3),
    "startedAt" TIMESTAMP(3),
    "readyAt" TIMESTAMP(3),
    "stoppedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Worker_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Job" (
    "id" TEXT NOT NULL,
    "endpointId" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "status" "JobStatus" NOT NULL DEFAULT 'IN_QUEUE',
    "input" JSONB NOT NULL,
    "output" JSONB,
    "error" TEXT,
    "webhook" TEXT,
    "executionTimeoutMs" INTEGER NOT NULL DEFAULT 600000,
    "ttlMs" INTEGER NOT NULL DEFAULT 86400000,
    "lowPriority" BOOLEAN NOT NULL DEFAULT false,
    "sync" BOOLEAN NOT NULL DEFAULT false,
    "workerId" TEXT,
    "retries" INTEGER NOT NULL DEFAULT 0,
    "streamDelivered" INTEGER NOT NULL DEFAULT 0,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "startedAt" TIMESTAMP(3),
    "completedAt" TIMESTAMP(3),
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Job_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "JobStreamChunk" (
    "jobId" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "output" JSONB NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "JobStreamChunk_pkey" PRIMARY KEY ("jobId","seq")
);

-- CreateTable
CREATE TABLE "UsageRecord" (
    "id" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "endpointId" TEXT,
    "workerId" TEXT NOT NULL,
    "gpuTypeId" TEXT,
    "gpuCount" INTEGER NOT NULL DEFAULT 0,
    "cpuFlavorId" TEXT,
    "startedAt" TIMESTAMP(3) NOT NULL,
    "endedAt" TIMESTAMP(3) NOT NULL,
    "seconds" DOUBLE PRECISION NOT NULL,

    CONSTRAINT "UsageRecord_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "Account_email_key" ON "Account"("email");

-- CreateIndex
CREATE UNIQUE INDEX "ApiKey_hash_key" ON "ApiKey"("hash");

-- CreateIndex
CREATE INDEX "ApiKey_accountId_idx" ON "ApiKey"("accountId");

-- CreateIndex
CREATE INDEX "RateLimitCounter_windowStart_idx" ON "RateLimitCounter"("windowStart");

-- CreateIndex
CREATE INDEX "Endpoint_accountId_idx" ON "Endpoint"("accountId");

-- CreateIndex
CREATE UNIQUE INDEX "Endpoint_accountId_name_key" ON "Endpoint"("accountId", "name");

-- CreateIndex
CREATE UNIQUE INDEX "Release_endpointId_version_key" ON "Release"("endpointId", "version");

-- CreateIndex
CREATE UNIQUE INDEX "Template_accountId_name_key" ON "Template"("accountId", "name");

-- CreateIndex
CREATE UNIQUE INDEX "RegistryCredential_accountId_name_key" ON "RegistryCredential"("accountId", "name");

-- CreateIndex
CREATE UNIQUE INDEX "NetworkVolume_accountId_name_key" ON "NetworkVolume"("accountId", "name");

-- CreateIndex
CREATE UNIQUE INDEX "Pod_accountId_name_key" ON "Pod"("accountId", "name");

-- CreateIndex
CREATE UNIQUE INDEX "Host_name_key" ON "Host"("name");

-- CreateIndex
CREATE UNIQUE INDEX "Worker_credentialHash_key" ON "Worker"("credentialHash");

-- CreateIndex
CREATE INDEX "Worker_endpointId_status_idx" ON "Worker"("endpointId", "status");

-- CreateIndex
CREATE INDEX "Worker_hostId_idx" ON "Worker"("hostId");

-- CreateIndex
CREATE INDEX "Job_endpointId_status_lowPriority_createdAt_idx" ON "Job"("endpointId", "status", "lowPriority", "createdAt");

-- CreateIndex
CREATE INDEX "Job_workerId_status_idx" ON "Job"("workerId", "status");

-- CreateIndex
CREATE INDEX "Job_expiresAt_idx" ON "Job"("expiresAt");

-- CreateIndex
CREATE INDEX "UsageRecord_accountId_startedAt_idx" ON "UsageRecord"("accountId", "startedAt");

-- CreateIndex
CREATE INDEX "UsageRecord_endpointId_startedAt_idx" ON "UsageRecord"("endpointId", "startedAt");

-- AddForeignKey
ALTER TABLE "ApiKey" ADD CONSTRAINT "ApiKey_accountId_fkey" FOREIGN KEY ("accountId") REFERENCES "Account"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Endpoint" ADD CONSTRAINT "Endpoint_accountId_fkey" FOREIGN KEY ("accountId") REFERENCES "Account"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Endpoint" ADD CONSTRAINT "Endpoint_registryId_fkey" FOREIGN KEY ("registryId") REFERENCES "RegistryCredential"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Endpoint" ADD CONSTRAINT "Endpoint_templateId_fkey" FOREIGN KEY ("templateId") REFERENCES "Template"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Release" ADD CONSTRAINT "Release_endpointId_fkey" FOREIGN KEY ("endpointId") REFERENCES "Endpoint"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Template" ADD CONSTRAINT "Template_accountId_fkey" FOREIGN KEY ("accountId") REFERENCES "Account"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Template" ADD CONSTRAINT "Template_registryId_fkey" FOREIGN KEY ("registryId") REFERENCES "RegistryCredential"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "RegistryCredential" ADD CONSTRAINT "RegistryCredential_accountId_fkey" FOREIGN KEY ("accountId") REFERENCES "Account"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "NetworkVolume" ADD CONSTRAINT "NetworkVolume_accountId_fkey" FOREIGN KEY ("accountId") REFERENCES "Account"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Pod" ADD CONSTRAINT "Pod_accountId_fkey" FOREIGN KEY ("accountId") REFERENCES "Account"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Pod" ADD CONSTRAINT "Pod_templateId_fkey" FOREIGN KEY ("templateId") REFERENCES "Template"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Pod" ADD CONSTRAINT "Pod_registryId_fkey" FOREIGN KEY ("registryId") REFERENCES "RegistryCredential"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Worker" ADD CONSTRAINT "Worker_endpointId_fkey" FOREIGN KEY ("endpointId") REFERENCES "Endpoint"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Worker" ADD CONSTRAINT "Worker_podId_fkey" FOREIGN KEY ("podId") REFERENCES "Pod"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Worker" ADD CONSTRAINT "Worker_hostId_fkey" FOREIGN KEY ("hostId") REFERENCES "Host"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Job" ADD CONSTRAINT "Job_endpointId_fkey" FOREIGN KEY ("endpointId") REFERENCES "Endpoint"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Job" ADD CONSTRAINT "Job_accountId_fkey" FOREIGN KEY ("accountId") REFERENCES "Account"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Job" ADD CONSTRAINT "Job_workerId_fkey" FOREIGN KEY ("workerId") REFERENCES "Worker"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "JobStreamChunk" ADD CONSTRAINT "JobStreamChunk_jobId_fkey" FOREIGN KEY ("jobId") REFERENCES "Job"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "UsageRecord" ADD CONSTRAINT "UsageRecord_accountId_fkey" FOREIGN KEY ("accountId") REFERENCES "Account"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "UsageRecord" ADD CONSTRAINT "UsageRecord_workerId_fkey" FOREIGN KEY ("workerId") REFERENCES "Worker"("id") ON DELETE CASCADE ON UPDATE CASCADE;
