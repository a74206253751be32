-- CreateTable
CREATE TABLE "links" (
    "id" TEXT NOT NULL,
    "file_id" INTEGER NOT NULL,
    "token" TEXT NOT NULL,
    "expires_at" TIMESTAMP(3),
    "max_downloads" INTEGER,
    "password_hash" TEXT,
    "download_count" BIGINT NOT NULL DEFAULT 0,
    "bytes_served" BIGINT NOT NULL DEFAULT 0,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "links_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "links_token_key" ON "links"("token");

-- CreateIndex
CREATE INDEX "links_file_id_idx" ON "links"("file_id");

-- AddForeignKey
ALTER TABLE "links" ADD CONSTRAINT "links_file_id_fkey" FOREIGN KEY ("file_id") REFERENCES "files"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Every existing link becomes its file's primary link, with the same token
-- (files.link_token keeps naming it), no rules, and the downloads it served.
INSERT INTO "links" ("id", "file_id", "token", "download_count", "created_at")
SELECT gen_random_uuid()::text, "id", "link_token", "download_count", "created_at" FROM "files";
