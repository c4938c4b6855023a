-- `flash login` requests (domain/accounts/flash-login.ts): made without a key, decided by a
-- signed-in user, and consumed by the poll that hands out the key. Only the id's SHA-256 is kept.
CREATE TYPE "FlashLoginStatus" AS ENUM ('PENDING', 'APPROVED', 'DENIED', 'CONSUMED');

CREATE TABLE "FlashLoginRequest" (
    "idHash" TEXT NOT NULL,
    "status" "FlashLoginStatus" NOT NULL DEFAULT 'PENDING',
    "requesterIp" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "accountId" TEXT,
    "decidedByKeyId" TEXT,
    "scopes" "ApiKeyScope"[],
    "apiKeyId" TEXT,

    CONSTRAINT "FlashLoginRequest_pkey" PRIMARY KEY ("idHash")
);

CREATE INDEX "FlashLoginRequest_expiresAt_idx" ON "FlashLoginRequest"("expiresAt");
