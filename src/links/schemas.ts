// A link as the API shows it (issue 52, "the API described once"): the
// presenter (src/http/present.ts) is typed by this schema and src/openapi/
// documents it, so the two cannot drift.
import { z } from 'zod';
import { count, optionalDate, publicUrlOf } from '../wire-schemas.js';

/** What GET and POST /files/{file_id}/links answer for each link. */
export const linkSchema = (publicUrl: string) =>
  z
    .strictObject({
      link_id: z.uuid().meta({ description: 'Identifier of the link; used in paths. Tells nothing about the token.' }),
      public_link: publicUrlOf(publicUrl, '/download', '[A-Za-z0-9_-]+', 'The link\'s download URL.'),
      primary: z.boolean().meta({ description: 'Whether this is the file\'s `public_link`. Every file has exactly one primary link.' }),
      expires_at: optionalDate('When the link stops working: its own `expires_in` or its file\'s expiry, whichever comes first. Null: never.'),
      max_downloads: z.number().int().min(1).nullable().meta({ description: 'Complete downloads the link serves, as a byte budget of `max_downloads` x size (ranges count their bytes). Null: unlimited.' }),
      download_count: count('Complete whole-file downloads through this link (the file\'s `download_count` counts them over all its links).'),
      password_protected: z.boolean().meta({ description: 'Whether downloads need the password (HTTP Basic, any user name).' }),
    })
    .meta({ description: 'A public link to a file, with its own rules and count.' });
export type LinkAnswer = z.infer<ReturnType<typeof linkSchema>>;
