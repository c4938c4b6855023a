-- Images on hosts ahead of the first call (activities/image-prepull.ts): since when a host has had an
-- image for an account, and whether a pre-pull or a worker's start put it there first.
CREATE TABLE "HostImage" (
    "hostId" TEXT NOT NULL,
    "accountId" TEXT NOT NULL,
    "image" TEXT NOT NULL,
    "pulledAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "source" TEXT NOT NULL,
    "ensuredAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "HostImage_pkey" PRIMARY KEY ("hostId","accountId","image")
);

ALTER TABLE "HostImage" ADD CONSTRAINT "HostImage_hostId_fkey" FOREIGN KEY ("hostId") REFERENCES "Host"("id") ON DELETE CASCADE ON UPDATE CASCADE;
