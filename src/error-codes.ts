// Every error code the service can answer, with its HTTP status: the one
// registry. AppError takes its status from here (a code not in it does not
// compile), the OpenAPI document lists its codes from here, and
// test/error-codes.test.ts fails when docs/errors.md, the table people read,
// says otherwise. Messages stay with the code that throws: they name the
// case ("... of 1048576 bytes"); `meaning` is what the code means in general.

export interface ErrorCodeInfo {
  status: number;
  /** What the code means, in one sentence a client's author reads. */
  meaning: string;
}

export const ERROR_CODES = {
  // 400: the request is wrong, and sending it again will not help.
  bad_request: { status: 400, meaning: 'The request could not be parsed (request line or headers); the connection is closed.' },
  repeated_header: { status: 400, meaning: 'Authorization or Host came more than once; the connection is closed.' },
  invalid_multipart: { status: 400, meaning: 'The upload body is not well-formed multipart/form-data with a boundary.' },
  missing_file: { status: 400, meaning: 'The upload has no file part named `file` with a filename.' },
  multiple_files: { status: 400, meaning: 'The upload has more than one file part.' },
  unexpected_file_part: { status: 400, meaning: 'The upload has a file part with another name than `file`.' },
  too_many_parts: { status: 400, meaning: 'The multipart body has too many fields or parts.' },
  upload_aborted: { status: 400, meaning: 'The request body ended before it was complete.' },
  field_after_file: { status: 400, meaning: 'A multipart text field came after the file part; options must come before it (the file is streamed).' },
  invalid_expires_in: { status: 400, meaning: 'The expires_in is not an integer number of seconds of at least 1, or is over the plan\'s max_expires_in.' },
  invalid_max_downloads: { status: 400, meaning: 'The max_downloads is not an integer of at least 1.' },
  invalid_password: { status: 400, meaning: 'The password is not a string of 1 to 256 characters.' },
  invalid_filename: { status: 400, meaning: 'The filename is empty, too long or has control characters.' },
  invalid_parameter: { status: 400, meaning: 'A query parameter is not an integer in its range.' },
  invalid_file_id: { status: 400, meaning: 'The file id in the path is not an integer from 1 to 2147483647.' },
  invalid_upload_length: { status: 400, meaning: 'Upload-Length or Upload-Defer-Length is missing, malformed or contradicts the upload.' },
  invalid_upload_offset: { status: 400, meaning: 'Upload-Offset is missing or malformed.' },
  invalid_upload_metadata: { status: 400, meaning: 'Upload-Metadata is not comma-separated "key base64value" pairs with unique keys.' },
  invalid_checksum: { status: 400, meaning: 'Upload-Checksum is not "sha256 <base64 digest>".' },
  unsupported_checksum_algorithm: { status: 400, meaning: 'Upload-Checksum names another algorithm than sha256.' },
  upload_length_exceeded: { status: 400, meaning: 'The body goes past the upload\'s Upload-Length.' },
  invalid_direct_upload: { status: 400, meaning: 'A direct upload\'s JSON is not {"filename", "size" (at least 1), "part_size"?, "sha256"?, ...} with values in range, or its part numbers are outside the upload.' },
  invalid_request: { status: 400, meaning: 'Admin API: a field of the JSON body is missing or invalid.' },
  invalid_json: { status: 400, meaning: 'The body is not a JSON object (admin API, and a new link\'s options).' },
  invalid_webhook: { status: 400, meaning: 'A new webhook\'s JSON is not {"url": an http(s) URL, "events": event types} (no other fields).' },
  invalid_file_request: { status: 400, meaning: 'A new file request\'s JSON is not {"title"?, "max_files"?, "max_file_size"?, "expires_in"?, "password"?} with values in range (no other fields).' },
  invalid_key_request: { status: 400, meaning: 'A new key\'s JSON is not {"name", "scopes", "expires_in"?, "allowed_cidrs"?} with known scopes, a name of 1 to 100 characters and CIDR ranges (no other fields).' },
  unknown_field: { status: 400, meaning: 'The JSON body of a new link has a field other than expires_in, max_downloads and password.' },
  // 401, 403: who is asking, and what their plan allows.
  missing_api_key: { status: 401, meaning: 'The request has no Authorization header with a Bearer API key.' },
  invalid_api_key: { status: 401, meaning: 'The API key is unknown, revoked or malformed.' },
  password_required: { status: 401, meaning: 'The download link or file request has a password: send it with Authorization: Basic (any user name).' },
  wrong_password: { status: 401, meaning: 'The password sent for the download link or file request is wrong; each wrong one counts toward the address\'s failures.' },
  invalid_admin_token: { status: 401, meaning: 'Admin API: the admin token is missing or wrong.' },
  plan_without_api_access: { status: 403, meaning: 'The account\'s plan does not include the API.' },
  insufficient_scope: { status: 403, meaning: 'The API key lacks the scope the route needs (named in the message and in WWW-Authenticate), or a key was asked to make or revoke a key wider than itself.' },
  key_exceeds_creator: { status: 403, meaning: 'A new key would outlive the key making it, or be usable from addresses that key may not use.' },
  address_not_allowed: { status: 403, meaning: 'The API key may not be used from this client address (its allowed_cidrs).' },
  key_limit: { status: 403, meaning: 'The account already has as many keys as allowed (50); revoke one first.' },
  file_too_large: { status: 403, meaning: 'The file is larger than the plan\'s max_file_size.' },
  storage_quota_exceeded: { status: 403, meaning: 'The upload would take the account\'s stored bytes past the plan\'s max_total_size.' },
  webhook_limit: { status: 403, meaning: 'The account already has as many webhooks as allowed (10); delete one first.' },
  daily_upload_limit: { status: 403, meaning: 'The plan\'s uploads for this UTC day are used up.' },
  cross_site_request: { status: 403, meaning: 'A browser sent the request for another site\'s page (Sec-Fetch-Site, Origin): a write to a file request link, or a password link embedded by another site; it could carry the visitor\'s cached password.' },
  // 404, 405: nothing there.
  not_found: { status: 404, meaning: 'No such route.' },
  file_not_found: { status: 404, meaning: 'No such file in this account, or no such download link.' },
  link_not_found: { status: 404, meaning: 'No such link on this file.' },
  upload_not_found: { status: 404, meaning: 'No such resumable or direct upload in this account, or it expired (a direct one: or was completed or aborted).' },
  direct_uploads_off: { status: 404, meaning: 'The server does not take uploads straight to the store (S3_DIRECT_UPLOADS is off); use tus or a plain upload.' },
  request_not_found: { status: 404, meaning: 'No such file request in this account, or its upload link is unknown or closed.' },
  webhook_not_found: { status: 404, meaning: 'No such webhook in this account.' },
  key_not_found: { status: 404, meaning: 'No such API key in this account (or it is already revoked).' },
  account_not_found: { status: 404, meaning: 'Admin API: no such account.' },
  plan_not_found: { status: 404, meaning: 'Admin API: no such plan.' },
  method_not_allowed: { status: 405, meaning: 'The route exists, but not with this method (see Allow).' },
  // 408: too slow.
  request_timeout: { status: 408, meaning: 'The request headers took longer than HEADERS_TIMEOUT.' },
  upload_too_slow: { status: 408, meaning: 'The upload body came slower than UPLOAD_MIN_RATE; the connection is closed.' },
  body_timeout: { status: 408, meaning: 'A JSON request body did not arrive within BODY_TIMEOUT; the connection is closed.' },
  // 409..460: the state of a resumable upload, and what the protocol requires.
  upload_offset_mismatch: { status: 409, meaning: 'Upload-Offset is not the upload\'s offset (the answer carries the real one).' },
  upload_busy: { status: 409, meaning: 'Another request is writing to (or completing, or aborting) this upload; try again shortly.' },
  upload_complete: { status: 409, meaning: 'The upload is already a file; delete the file instead.' },
  email_taken: { status: 409, meaning: 'Admin API: an account with this email already exists.' },
  account_not_empty: { status: 409, meaning: 'Admin API: the account still has files or uploads in progress; delete those first.' },
  plan_in_use: { status: 409, meaning: 'Admin API: accounts are still on the plan; move or delete them first.' },
  last_full_key: { status: 409, meaning: 'The key is the account\'s last full key without an expiry; make another first (or the operator\'s `dropstream keys rotate`).' },
  link_expired: { status: 410, meaning: 'The download link, or its file, has expired.' },
  link_exhausted: { status: 410, meaning: 'The download link\'s downloads (its byte budget, max_downloads times the size) are used up.' },
  request_expired: { status: 410, meaning: 'The file request\'s expires_in has passed: its upload link takes no more files.' },
  request_full: { status: 410, meaning: 'The file request has its max_files (files received and uploads in progress through it).' },
  upload_expired: { status: 410, meaning: 'An upload through a file request did not finish within REQUEST_UPLOAD_EXPIRY (or before the request expired) and was cut; nothing of it was kept.' },
  tus_version_unsupported: { status: 412, meaning: 'Tus-Resumable is missing or not 1.0.0.' },
  unsupported_media_type: { status: 415, meaning: 'A PATCH body that is not application/offset+octet-stream.' },
  direct_upload_mismatch: { status: 422, meaning: 'At a direct upload\'s complete, the parts the store holds do not add up to the declared size and part size, their ETags are not those sent, or the object does not match the declared sha256; the upload was aborted and nothing of it kept.' },
  range_not_satisfiable: { status: 416, meaning: 'The requested range is outside the file.' },
  checksum_mismatch: { status: 460, meaning: 'Upload-Checksum does not match the body; nothing of it was kept.' },
  // 429, 431: too much.
  rate_limited: { status: 429, meaning: 'The plan\'s requests per minute or per day are used up.' },
  too_many_uploads: { status: 429, meaning: 'The account already runs as many uploads as its plan allows at once.' },
  too_many_requests_in_flight: { status: 429, meaning: 'The account already has as many requests in progress on this instance as ACCOUNT_REQUESTS_IN_FLIGHT (plus its uploads) allows.' },
  too_many_failures: { status: 429, meaning: 'This address sent too many bad API keys, unknown download links, wrong link passwords or wrong admin tokens; until the lockout ends, it is refused even with the right link password or admin token.' },
  link_password_locked: { status: 429, meaning: 'The download link (or file request) had too many wrong passwords from all addresses; its password is refused, right or wrong, until the lock ends.' },
  password_checks_busy: { status: 429, meaning: 'Too many link passwords are being checked on this instance at once; nothing was checked or counted.' },
  request_link_limited: { status: 429, meaning: 'This address sent too many requests, or started too many uploads, through file request links (REQUEST_LINK_REQUESTS_PER_MINUTE, REQUEST_LINK_UPLOADS_PER_HOUR).' },
  headers_too_large: { status: 431, meaning: 'The request headers are too large.' },
  // 5xx: our side; the request may work later.
  internal_error: { status: 500, meaning: 'An unexpected failure; details are in the server log only.' },
  not_implemented: { status: 501, meaning: 'No route knows this method.' },
  store_unavailable: { status: 503, meaning: 'The object store failed or did not answer in time; nothing was stored.' },
  database_unavailable: { status: 503, meaning: 'The database cannot be reached; nothing was changed.' },
  server_busy: { status: 503, meaning: 'Too many uploads are in flight on this instance.' },
} as const satisfies Record<string, ErrorCodeInfo>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The codes answered with `status`: `CodeOf<400>` is every 400 code. */
export type CodeOf<S extends number> = { [C in ErrorCode]: (typeof ERROR_CODES)[C]['status'] extends S ? C : never }[ErrorCode];

export const ERROR_CODE_NAMES = Object.keys(ERROR_CODES) as ErrorCode[];

export const statusOf = (code: ErrorCode): number => ERROR_CODES[code].status;
