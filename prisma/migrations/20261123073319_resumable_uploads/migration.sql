-- CreateTable
CREATE TABLE "resumable_uploads" (
    "id" TEXT NOT NULL,
    "account_id" INTEGER NOT NULL,
    "storage_key" TEXT NOT NULL,
    "filename" TEXT NOT NULL,
    "length" BIGINT,
    "upload_offset" BIGINT NOT NULL DEFAULT 0,
    "store_state" JSONB NOT NULL,
    "hash_state" BYTEA NOT NULL,
    "lock_token" TEXT,
    "locked_until" TIMESTAMP(3),
    "interrupted" BOOLEAN NOT NULL DEFAULT false,
    "expires_at" TIMESTAMP(3) NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "resumable_uploads_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "resumable_uploads_storage_key_key" ON "resumable_uploads"("storage_key");

-- CreateIndex
CREATE INDEX "resumable_uploads_account_id_idx" ON "resumable_uploads"("account_id");

-- CreateIndex
CREATE INDEX "resumable_uploads_expires_at_idx" ON "resumable_uploads"("expires_at");

-- AddForeignKey
ALTER TABLE "resumable_uploads" ADD CONSTRAINT "resumable_uploads_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;
