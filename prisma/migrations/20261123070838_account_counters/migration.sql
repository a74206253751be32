-- AlterTable
ALTER TABLE "accounts" ADD COLUMN     "file_count" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "total_bytes" BIGINT NOT NULL DEFAULT 0;

-- Existing accounts start with what they already hold.
UPDATE "accounts" SET "file_count" = c."files", "total_bytes" = c."bytes"
FROM (SELECT "account_id", count(*)::integer AS "files", coalesce(sum("size"), 0)::bigint AS "bytes" FROM "files" GROUP BY "account_id") c
WHERE "accounts"."id" = c."account_id";
