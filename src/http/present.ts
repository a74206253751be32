// How records look on the wire: snake_case, integers in bytes, UTC dates.
import type { FileListing } from '../files/record.js';

/** `YYYY-MM-DD HH:MM:SS`, in UTC. */
export const formatDate = (date: Date) => date.toISOString().slice(0, 19).replace('T', ' ');

export const publicLink = (publicUrl: string, token: string) => `${publicUrl}/download/${token}`;

export function presentFile(file: FileListing, publicUrl: string) {
  return {
    file_id: file.id,
    filename: file.filename,
    size: file.size,
    upload_date: formatDate(file.createdAt),
    download_count: file.downloadCount,
    public_link: publicLink(publicUrl, file.linkToken),
  };
}
