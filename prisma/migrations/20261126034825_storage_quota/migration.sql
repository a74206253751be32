-- AlterTable
ALTER TABLE "accounts" ADD COLUMN     "reserved_bytes" BIGINT NOT NULL DEFAULT 0;

-- AlterTable
ALTER TABLE "pending_objects" ADD COLUMN     "blocked_since" TIMESTAMP(3),
ADD COLUMN     "reserved_bytes" BIGINT NOT NULL DEFAULT 0;

-- AlterTable
ALTER TABLE "plans" ADD COLUMN     "max_expires_in" INTEGER,
ADD COLUMN     "max_total_size" BIGINT;
