import { isAbsolute, resolve } from 'node:path';
import { expect } from 'chai';
import { ConfigError, configVariables, loadConfig } from '../src/config.js';

/** The ConfigError loadConfig throws for `env`; fails the test when it does not throw one. */
function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return err as ConfigError;
  }
  expect.fail(`loadConfig(${JSON.stringify(env)}) did not throw`);
}

describe('loadConfig', () => {
  it('when nothing is set, then the defaults apply', () => {
    const config = loadConfig({});
    expect(config.port).to.equal(3000);
    expect(config.host).to.equal('0.0.0.0');
    expect(config.publicUrl).to.equal('http://localhost:3000');
    expect(config.adminHost).to.equal('127.0.0.1');
    expect(config.adminPort).to.equal(3001);
    expect(config.dataDir).to.equal(resolve('data'));
    expect(isAbsolute(config.dataDir)).to.equal(true);
    expect(config.databaseUrl).to.equal(undefined);
    expect(config.adminToken).to.equal(undefined);
    expect(config.logLevel).to.equal('info');
  });

  it('when the core variables are set, then each reaches the config', () => {
    const config = loadConfig({
      PORT: '8080',
      HOST: '127.0.0.1',
      PUBLIC_URL: 'https://files.example.com',
      DATA_DIR: '/srv/dropstream',
      DATABASE_URL: 'postgresql://u@db:5432/ds',
      ADMIN_HOST: '0.0.0.0',
      ADMIN_PORT: '9090',
      ADMIN_TOKEN: 'an-admin-token-of-at-least-32-characters',
      LOG_LEVEL: 'warn',
    });
    expect(config).to.include({
      port: 8080,
      host: '127.0.0.1',
      publicUrl: 'https://files.example.com',
      dataDir: '/srv/dropstream',
      databaseUrl: 'postgresql://u@db:5432/ds',
      adminHost: '0.0.0.0',
      adminPort: 9090,
      adminToken: 'an-admin-token-of-at-least-32-characters',
      logLevel: 'warn',
    });
  });

  it('when DATA_DIR is relative, then it is resolved to an absolute path', () => {
    expect(loadConfig({ DATA_DIR: 'some/dir' }).dataDir).to.equal(resolve('some/dir'));
  });

  it('when PUBLIC_URL ends with slashes, then they are removed', () => {
    expect(loadConfig({ PUBLIC_URL: 'https://files.example.com/' }).publicUrl).to.equal('https://files.example.com');
    expect(loadConfig({ PUBLIC_URL: 'https://example.com/dl//' }).publicUrl).to.equal('https://example.com/dl');
  });

  it('when PORT is set and PUBLIC_URL is not, then PUBLIC_URL follows PORT', () => {
    expect(loadConfig({ PORT: '8080' }).publicUrl).to.equal('http://localhost:8080');
  });

  it('when postgres:// is used instead of postgresql://, then DATABASE_URL is accepted', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://u@db/ds' }).databaseUrl).to.equal('postgres://u@db/ds');
  });

  const badValues: Array<[string, string]> = [
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['PORT', ' '],
    ['PORT', '0x10'],
    ['PORT', '1e3'],
    ['ADMIN_PORT', 'abc'],
    ['PUBLIC_URL', 'ftp://x'],
    ['PUBLIC_URL', 'not a url'],
    ['DATABASE_URL', 'mysql://x'],
    ['LOG_LEVEL', 'loud'],
    ['ADMIN_TOKEN', 'too-short'],
  ];
  for (const [name, value] of badValues) {
    it(`when ${name}=${JSON.stringify(value)}, then a ConfigError names ${name}`, () => {
      const err = configError({ [name]: value });
      expect(err.message).to.match(new RegExp(`\\b${name}\\b`));
      // Only the bad variable is blamed.
      for (const other of configVariables.filter((v) => v !== name)) expect(err.message).not.to.match(new RegExp(`\\b${other}\\b`));
    });
  }

  // Values WHATWG's URL parser refuses (the one pg, ioredis and the AWS SDK use) once got past
  // a scheme check and threw a TypeError with a stack trace at start (issue 37, item 4).
  const malformedUrls: Array<[string, string]> = [
    ['DATABASE_URL', 'postgresql://dropstream:pw@db:99999/dropstream'],
    ['DATABASE_URL', 'postgresql://dropstream:pw@[db/dropstream'],
    ['DATABASE_URL', 'not a url'],
    ['REDIS_URL', 'redis://:pw@cache:99999'],
    ['REDIS_URL', 'redis://ca che:6379'],
    ['PUBLIC_URL', 'http://files example.com'],
    ['PUBLIC_URL', 'files.example.com'],
    ['S3_ENDPOINT', 'http://[minio:9000'],
  ];
  for (const [name, value] of malformedUrls) {
    it(`when ${name}=${JSON.stringify(value)} is no URL, then a ConfigError names ${name} and shows a right one`, () => {
      const err = configError({ [name]: value, ...(name === 'S3_ENDPOINT' ? { S3_BUCKET: 'files' } : {}) });
      expect(err.message).to.match(new RegExp(`^invalid configuration: ${name}: .*e\\.g\\. [a-z]+://`));
    });
  }

  it('when DATABASE_URL or REDIS_URL is refused, then the message does not repeat the value (it may hold a password)', () => {
    expect(configError({ DATABASE_URL: 'postgresql://u:hunter2@db:99999/d' }).message).not.to.include('hunter2');
    expect(configError({ REDIS_URL: 'redis://:hunter2@cache:99999' }).message).not.to.include('hunter2');
  });

  it('when the DATABASE_URL password has a bare %, then a ConfigError says to percent-encode it (pg would throw URIError)', () => {
    expect(configError({ DATABASE_URL: 'postgresql://u:50%off@db/d' }).message).to.equal(
      'invalid configuration: DATABASE_URL: has a % in its password not followed by two hex digits: percent-encode the password (% is %25)',
    );
  });

  it('when two variables are bad, then the message names both', () => {
    const err = configError({ PORT: 'abc', LOG_LEVEL: 'loud' });
    expect(err.message).to.include('PORT').and.to.include('LOG_LEVEL');
  });

  it('when a variable is the empty string, then it is treated as unset', () => {
    const config = loadConfig({ PORT: '', HOST: '', PUBLIC_URL: '', DATA_DIR: '', DATABASE_URL: '', ADMIN_PORT: '', ADMIN_TOKEN: '', LOG_LEVEL: '' });
    expect(config.port).to.equal(3000);
    expect(config.host).to.equal('0.0.0.0');
    expect(config.publicUrl).to.equal('http://localhost:3000');
    expect(config.dataDir).to.equal(resolve('data'));
    expect(config.databaseUrl).to.equal(undefined);
    expect(config.adminPort).to.equal(3001);
    expect(config.adminToken).to.equal(undefined);
    expect(config.logLevel).to.equal('info');
  });

  it('when S3_PART_SIZE is outside what S3 accepts (5 MiB to 5 GiB), then the configuration is refused naming it', () => {
    const MiB = 1024 * 1024;
    const s3 = (S3_PART_SIZE: string) => loadConfig({ S3_BUCKET: 'uploads', S3_PART_SIZE }).s3?.partSize;
    expect(() => s3(String(5 * MiB - 1))).to.throw(ConfigError, /S3_PART_SIZE: must be bytes from 5 MiB/);
    expect(() => s3(String(5 * 1024 * MiB + 1))).to.throw(ConfigError, /S3_PART_SIZE/);
    expect(s3(String(5 * MiB))).to.equal(5 * MiB);
    expect(s3(String(5 * 1024 * MiB))).to.equal(5 * 1024 * MiB);
  });

  it('when S3_ABORT_INCOMPLETE_DAYS is unset, 0 or not a number, then 7, 0 (no rule) or a ConfigError', () => {
    expect(loadConfig({ S3_BUCKET: 'uploads' }).s3?.abortIncompleteDays).to.equal(7);
    expect(loadConfig({ S3_BUCKET: 'uploads', S3_ABORT_INCOMPLETE_DAYS: '0' }).s3?.abortIncompleteDays).to.equal(0);
    expect(() => loadConfig({ S3_BUCKET: 'uploads', S3_ABORT_INCOMPLETE_DAYS: 'week' })).to.throw(ConfigError, /S3_ABORT_INCOMPLETE_DAYS/);
  });

  it("when WEBHOOK_ACCOUNT_CONCURRENCY is unset, then an account's share is half of WEBHOOK_CONCURRENCY; more than it is refused", () => {
    const webhooks = (env: Record<string, string>) => loadConfig(env).webhooks;
    expect(webhooks({})).to.include({ concurrency: 16, accountConcurrency: 8, pendingDownloads: 1000 });
    expect(webhooks({ WEBHOOK_CONCURRENCY: '5' })).to.include({ concurrency: 5, accountConcurrency: 3 });
    expect(webhooks({ WEBHOOK_CONCURRENCY: '5', WEBHOOK_ACCOUNT_CONCURRENCY: '5' })).to.include({ accountConcurrency: 5 });
    expect(configError({ WEBHOOK_ACCOUNT_CONCURRENCY: '17' }).message).to.match(/WEBHOOK_ACCOUNT_CONCURRENCY.*WEBHOOK_CONCURRENCY/);
  });

  it('when RESUMABLE_EXPIRY is longer than the S3 lifecycle rule that aborts incomplete uploads, then a ConfigError names both', () => {
    const expiry = (env: Record<string, string>) => loadConfig(env).resumableExpiry;
    expect(expiry({})).to.equal(86_400);
    expect(expiry({ RESUMABLE_EXPIRY: String(30 * 86_400) }), 'the local store has no such rule').to.equal(30 * 86_400);
    expect(expiry({ S3_BUCKET: 'uploads', RESUMABLE_EXPIRY: String(7 * 86_400) })).to.equal(7 * 86_400);
    expect(() => expiry({ S3_BUCKET: 'uploads', RESUMABLE_EXPIRY: String(7 * 86_400 + 1) })).to.throw(ConfigError, /RESUMABLE_EXPIRY: .*S3_ABORT_INCOMPLETE_DAYS \(7 days/);
    expect(() => expiry({ S3_BUCKET: 'uploads', S3_ABORT_INCOMPLETE_DAYS: '1', RESUMABLE_EXPIRY: '86401' })).to.throw(ConfigError, /RESUMABLE_EXPIRY/);
    expect(expiry({ S3_BUCKET: 'uploads', S3_ABORT_INCOMPLETE_DAYS: '0', RESUMABLE_EXPIRY: String(30 * 86_400) }), 'no rule set').to.equal(30 * 86_400);
  });

  it('when STORE is unset, then S3_BUCKET chooses S3 as before; when set, it must agree with S3_BUCKET', () => {
    expect(loadConfig({}).store).to.equal('local');
    expect(loadConfig({ S3_BUCKET: 'uploads' }).store).to.equal('s3');
    expect(loadConfig({ STORE: 's3', S3_BUCKET: 'uploads' }).store).to.equal('s3');
    expect(loadConfig({ STORE: 'local' }).store).to.equal('local');
    expect(() => loadConfig({ STORE: 's3' })).to.throw(ConfigError, /S3_BUCKET: is required when STORE is s3/);
    expect(() => loadConfig({ STORE: 'local', S3_BUCKET: 'uploads' })).to.throw(ConfigError, /STORE: is local but S3_BUCKET is set/);
    expect(() => loadConfig({ STORE: 'disk' })).to.throw(ConfigError, /STORE/);
  });

  it('when S3_PRESIGNED_DOWNLOADS is set, then S3 signs for S3_PUBLIC_ENDPOINT (default S3_ENDPOINT) for S3_PRESIGN_SECONDS (default 60); on the local store it is refused in one line', () => {
    expect(loadConfig({ S3_BUCKET: 'uploads' }).s3?.presign, 'off by default').to.equal(undefined);
    expect(loadConfig({ S3_BUCKET: 'uploads', S3_ENDPOINT: 'http://minio:9000', S3_PRESIGNED_DOWNLOADS: 'true' }).s3?.presign).to.deep.equal({ publicEndpoint: 'http://minio:9000', seconds: 60 });
    const env = { S3_BUCKET: 'uploads', S3_ENDPOINT: 'http://minio:9000', S3_PRESIGNED_DOWNLOADS: 'true', S3_PUBLIC_ENDPOINT: 'https://files.example.com', S3_PRESIGN_SECONDS: '300' };
    expect(loadConfig(env).s3?.presign).to.deep.equal({ publicEndpoint: 'https://files.example.com', seconds: 300 });
    expect(() => loadConfig({ ...env, S3_PRESIGN_SECONDS: '0' })).to.throw(ConfigError, /S3_PRESIGN_SECONDS/);
    expect(() => loadConfig({ ...env, S3_PUBLIC_ENDPOINT: 'files.example.com' })).to.throw(ConfigError, /S3_PUBLIC_ENDPOINT/);
    let message = '';
    try {
      loadConfig({ S3_PRESIGNED_DOWNLOADS: 'true' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).to.match(/S3_PRESIGNED_DOWNLOADS: is true but the store is local/);
    expect(message.trim().split('\n')).to.have.length(1);
  });

  it('when S3_DIRECT_UPLOADS is set, then S3 signs parts for S3_PUBLIC_ENDPOINT (default S3_ENDPOINT); on the local store, or with an expiry past the bucket\'s lifecycle rule, it is refused in one line', () => {
    expect(loadConfig({ S3_BUCKET: 'uploads' }).s3?.direct, 'off by default').to.equal(undefined);
    expect(loadConfig({ S3_BUCKET: 'uploads', S3_ENDPOINT: 'http://minio:9000', S3_DIRECT_UPLOADS: 'true' }).s3?.direct).to.deep.equal({ publicEndpoint: 'http://minio:9000' });
    expect(loadConfig({ S3_BUCKET: 'uploads', S3_DIRECT_UPLOADS: 'true', S3_PUBLIC_ENDPOINT: 'https://files.example.com' }).s3?.direct).to.deep.equal({ publicEndpoint: 'https://files.example.com' });
    expect(loadConfig({}).directUploadExpiry).to.equal(86_400);
    const refusal = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (err) {
        return (err as Error).message.trim().split('\n');
      }
      return [];
    };
    expect(refusal({ S3_DIRECT_UPLOADS: 'true' })).to.have.length(1).and.to.satisfy((lines: string[]) => /S3_DIRECT_UPLOADS: is true but the store is local/.test(lines[0]!));
    expect(refusal({ S3_BUCKET: 'b', S3_DIRECT_UPLOADS: 'true', S3_ABORT_INCOMPLETE_DAYS: '1', DIRECT_UPLOAD_EXPIRY: '90000' })[0]).to.match(/DIRECT_UPLOAD_EXPIRY: is longer than S3_ABORT_INCOMPLETE_DAYS/);
  });

  it('when a secret is still the .env.example placeholder, then the configuration is refused naming it (issue 21)', () => {
    expect(() => loadConfig({ S3_BUCKET: 'b', S3_ACCESS_KEY_ID: 'app', S3_SECRET_ACCESS_KEY: 'change-me-minio-app-secret' })).to.throw(ConfigError, /S3_SECRET_ACCESS_KEY: is still the .env.example placeholder/);
    expect(() => loadConfig({ ADMIN_TOKEN: 'change-me-admin-token-0123456789abcdef' })).to.throw(ConfigError, /ADMIN_TOKEN: is still the .env.example placeholder/);
    expect(() => loadConfig({ DATABASE_URL: 'postgresql://dropstream:change-me-postgres-password@postgres:5432/dropstream' })).to.throw(ConfigError, /DATABASE_URL: has the .env.example placeholder/);
    expect(loadConfig({ DATABASE_URL: 'postgresql://dropstream:s3cret@postgres:5432/dropstream' }).databaseUrl).to.include('s3cret');
  });

  it('when DATABASE_DIRECT_URL is set, then it is kept beside DATABASE_URL, checked as DATABASE_URL is, and refused alone (issue 58)', () => {
    const pooled = 'postgresql://dropstream:s3cret@pgbouncer:6432/dropstream';
    const direct = 'postgresql://dropstream:s3cret@postgres:5432/dropstream';
    const config = loadConfig({ DATABASE_URL: pooled, DATABASE_DIRECT_URL: direct });
    expect([config.databaseUrl, config.databaseDirectUrl]).to.deep.equal([pooled, direct]);
    expect(loadConfig({ DATABASE_URL: pooled }).databaseDirectUrl).to.equal(undefined);
    expect(configError({ DATABASE_DIRECT_URL: direct }).message).to.match(/DATABASE_DIRECT_URL: is set but DATABASE_URL is not/);
    expect(configError({ DATABASE_URL: pooled, DATABASE_DIRECT_URL: 'http://postgres/d' }).message).to.match(/DATABASE_DIRECT_URL: must be a postgresql:\/\/ or postgres:\/\/ URL/);
    expect(configError({ DATABASE_URL: pooled, DATABASE_DIRECT_URL: 'postgresql://u:50%off@db/d' }).message).to.match(/DATABASE_DIRECT_URL: has a % in its password/).and.not.include('50%off');
    expect(configError({ DATABASE_URL: pooled, DATABASE_DIRECT_URL: 'postgresql://dropstream:change-me-postgres-password@postgres:5432/dropstream' }).message).to.match(/DATABASE_DIRECT_URL: has the .env.example placeholder/);
  });

  it('when variables the server does not read are set, then they are ignored', () => {
    expect(loadConfig({ PATH: '/usr/bin', SOMETHING_ELSE: 'x' }).port).to.equal(3000);
  });

  it('when configVariables is read, then it lists every variable the server reads, by its environment name', () => {
    expect(configVariables).to.include.members([
      'PORT',
      'HOST',
      'PUBLIC_URL',
      'DATA_DIR',
      'DATABASE_URL',
      'ADMIN_HOST',
      'ADMIN_PORT',
      'ADMIN_TOKEN',
      'LOG_LEVEL',
      'STORE',
      'S3_ENDPOINT',
      'S3_BUCKET',
      'S3_REGION',
      'S3_ACCESS_KEY_ID',
      'S3_SECRET_ACCESS_KEY',
      'S3_FORCE_PATH_STYLE',
      'S3_PART_SIZE',
      'S3_PARTS_IN_FLIGHT',
      'S3_SHARED_PART_BUFFERS',
      'S3_ABORT_INCOMPLETE_DAYS',
      'S3_PRESIGNED_DOWNLOADS',
      'S3_PUBLIC_ENDPOINT',
      'S3_PRESIGN_SECONDS',
      'UPLOAD_CONCURRENCY',
    ]);
    for (const name of configVariables) expect(name).to.match(/^[A-Z][A-Z0-9_]*$/);
    expect(new Set(configVariables).size).to.equal(configVariables.length);
  });
});
