-- Keys their owners control (issue 57). Expand only: every column is new and
-- nullable or defaulted. Existing keys (and those an older release's `keys
-- rotate` inserts during a rolling upgrade) get full = true: they keep working
-- as full keys. public_id (key_id in the API) is filled for every row by its
-- default, gen_random_uuid() (core PostgreSQL since 13, and PGlite).
-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "allowed_cidrs" TEXT[],
ADD COLUMN     "expires_at" TIMESTAMP(3),
ADD COLUMN     "full" BOOLEAN NOT NULL DEFAULT true,
ADD COLUMN     "last_used_at" TIMESTAMP(3),
ADD COLUMN     "name" TEXT,
ADD COLUMN     "public_id" TEXT NOT NULL DEFAULT gen_random_uuid()::text,
ADD COLUMN     "scopes" TEXT[];

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_public_id_key" ON "api_keys"("public_id");
