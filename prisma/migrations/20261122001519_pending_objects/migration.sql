-- CreateTable
CREATE TABLE "pending_objects" (
    "storage_key" TEXT NOT NULL,
    "reason" TEXT NOT NULL,
    "upload_id" TEXT,
    "account_id" INTEGER,
    "quota_day" DATE,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "touched_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "pending_objects_pkey" PRIMARY KEY ("storage_key")
);

-- CreateIndex
CREATE INDEX "pending_objects_touched_at_idx" ON "pending_objects"("touched_at");
