-- The audit trail (issue 57): a new table, so expand only.
-- CreateTable
CREATE TABLE "audit_events" (
    "id" BIGSERIAL NOT NULL,
    "account_id" INTEGER NOT NULL,
    "action" TEXT NOT NULL,
    "subject" TEXT,
    "key_id" INTEGER,
    "key_public_id" TEXT,
    "key_name" TEXT,
    "request_id" TEXT,
    "actor" TEXT NOT NULL DEFAULT 'key',
    "client_address" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "audit_events_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "audit_events_account_id_created_at_id_idx" ON "audit_events"("account_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "audit_events_created_at_idx" ON "audit_events"("created_at");

-- AddForeignKey
ALTER TABLE "audit_events" ADD CONSTRAINT "audit_events_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;
