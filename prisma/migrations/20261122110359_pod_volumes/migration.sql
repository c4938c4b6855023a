-- AlterTable
ALTER TABLE "Pod" ADD COLUMN     "volumeHostId" TEXT,
ADD COLUMN     "volumeMountPath" TEXT NOT NULL DEFAULT '/workspace';

-- AddForeignKey
ALTER TABLE "Pod" ADD CONSTRAINT "Pod_volumeHostId_fkey" FOREIGN KEY ("volumeHostId") REFERENCES "Host"("id") ON DELETE SET NULL ON UPDATE CASCADE;
