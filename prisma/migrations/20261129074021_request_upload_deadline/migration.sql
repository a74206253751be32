-- AlterTable
ALTER TABLE "resumable_uploads" ADD COLUMN     "deadline" TIMESTAMP(3);
