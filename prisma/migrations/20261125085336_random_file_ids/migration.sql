-- File ids are chosen at random by the service (src/files/file-rows.ts) instead of a sequence that
-- told every tenant how many files had been uploaded (issue 27). Existing ids stay as they are.
-- AlterTable
ALTER TABLE "files" ALTER COLUMN "id" DROP DEFAULT;
DROP SEQUENCE "files_id_seq";
