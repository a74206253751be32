-- AlterTable
ALTER TABLE "plans" ADD COLUMN     "concurrent_uploads" INTEGER;

-- Uploads at once per account (the free plan has no API access, so no cap matters there).
-- Existing installations keep any plan they changed or added uncapped (null).
UPDATE "plans" SET "concurrent_uploads" = 4 WHERE "name" = 'pro';
UPDATE "plans" SET "concurrent_uploads" = 8 WHERE "name" = 'business';
