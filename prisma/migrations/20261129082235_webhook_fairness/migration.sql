-- AlterTable
ALTER TABLE "webhook_endpoints" ADD COLUMN     "consecutive_timeouts" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "paused_until" TIMESTAMP(3);

-- AlterTable
ALTER TABLE "webhook_messages" ADD COLUMN     "file_id" INTEGER;

-- CreateIndex
CREATE INDEX "webhook_messages_pending_idx" ON "webhook_messages"("endpoint_id", "next_attempt_at") WHERE (next_attempt_at IS NOT NULL);

-- CreateIndex
CREATE INDEX "webhook_messages_pending_downloads_idx" ON "webhook_messages"("endpoint_id", "file_id") WHERE (type = 'file.downloaded' AND next_attempt_at IS NOT NULL);
