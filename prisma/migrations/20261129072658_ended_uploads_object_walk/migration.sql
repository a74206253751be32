-- AlterTable
ALTER TABLE "pending_objects" ADD COLUMN     "attempts" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "ended_at" TIMESTAMP(3),
ADD COLUMN     "late_until" TIMESTAMP(3),
ADD COLUMN     "retry_at" TIMESTAMP(3);

-- CreateTable
CREATE TABLE "sweep_positions" (
    "name" TEXT NOT NULL,
    "position" TEXT NOT NULL,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "sweep_positions_pkey" PRIMARY KEY ("name")
);

-- CreateIndex
CREATE INDEX "pending_objects_retry_at_idx" ON "pending_objects"("retry_at");
