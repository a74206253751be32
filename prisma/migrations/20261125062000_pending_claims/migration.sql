-- A sweep claims a cleanup record until this time, and removes it only after the store confirmed the removal.
ALTER TABLE "pending_objects" ADD COLUMN "claimed_until" TIMESTAMP(3);
