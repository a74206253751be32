-- AlterTable
ALTER TABLE "files" ADD COLUMN     "expires_at" TIMESTAMP(3);

-- AlterTable
ALTER TABLE "resumable_uploads" ADD COLUMN     "file_expires_in" INTEGER,
ADD COLUMN     "max_downloads" INTEGER,
ADD COLUMN     "password_hash" TEXT;

-- CreateIndex
CREATE INDEX "files_expires_at_idx" ON "files"("expires_at");
