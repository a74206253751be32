-- The plans every installation starts with. Operators change them with
-- `dropstream plans set`, and this migration never runs twice.
INSERT INTO "plans" ("name", "api_access", "requests_per_minute", "requests_per_day", "max_file_size", "daily_uploads") VALUES
  ('free',     false,   0,     0,           0,    0),
  ('pro',      true,   50,  5000,  5368709120,  500),
  ('business', true,  100, 10000, 10737418240, 1000);
