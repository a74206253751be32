-- AlterTable
ALTER TABLE "files" ADD COLUMN     "request_id" TEXT;

-- AlterTable
ALTER TABLE "pending_objects" ADD COLUMN     "request_id" TEXT;

-- CreateTable
CREATE TABLE "file_requests" (
    "id" TEXT NOT NULL,
    "account_id" INTEGER NOT NULL,
    "token" TEXT NOT NULL,
    "title" TEXT,
    "max_files" INTEGER,
    "max_file_size" BIGINT,
    "expires_at" TIMESTAMP(3),
    "password_hash" TEXT,
    "closed_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "file_requests_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "file_requests_token_key" ON "file_requests"("token");

-- CreateIndex
CREATE INDEX "file_requests_account_id_created_at_idx" ON "file_requests"("account_id", "created_at" DESC);

-- CreateIndex
CREATE INDEX "files_request_id_idx" ON "files"("request_id");

-- CreateIndex
CREATE INDEX "pending_objects_request_id_idx" ON "pending_objects"("request_id");

-- AddForeignKey
ALTER TABLE "files" ADD CONSTRAINT "files_request_id_fkey" FOREIGN KEY ("request_id") REFERENCES "file_requests"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "file_requests" ADD CONSTRAINT "file_requests_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;
