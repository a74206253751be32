-- Uploads straight to the store (issue 55): a new table, and files.sha256 nullable (an upload whose client declared no SHA-256: the service never sees its bytes). Expand only: dropping NOT NULL lets old code read every row it wrote.
-- AlterTable
ALTER TABLE "files" ALTER COLUMN "sha256" DROP NOT NULL;

-- CreateTable
CREATE TABLE "direct_uploads" (
    "id" TEXT NOT NULL,
    "account_id" INTEGER NOT NULL,
    "storage_key" TEXT NOT NULL,
    "upload_id" TEXT NOT NULL,
    "filename" TEXT NOT NULL,
    "size" BIGINT NOT NULL,
    "part_size" BIGINT NOT NULL,
    "sha256" TEXT,
    "request_id" TEXT,
    "file_expires_in" INTEGER,
    "max_downloads" INTEGER,
    "password_hash" TEXT,
    "claimed_until" TIMESTAMP(3),
    "expires_at" TIMESTAMP(3) NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "direct_uploads_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "direct_uploads_storage_key_key" ON "direct_uploads"("storage_key");

-- CreateIndex
CREATE INDEX "direct_uploads_account_id_idx" ON "direct_uploads"("account_id");

-- CreateIndex
CREATE INDEX "direct_uploads_expires_at_idx" ON "direct_uploads"("expires_at");

-- AddForeignKey
ALTER TABLE "direct_uploads" ADD CONSTRAINT "direct_uploads_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "direct_uploads" ADD CONSTRAINT "direct_uploads_storage_key_fkey" FOREIGN KEY ("storage_key") REFERENCES "pending_objects"("storage_key") ON DELETE CASCADE ON UPDATE CASCADE;
