// Which database failures mean "not there right now" (503 with Retry-After,
// and retried at start) rather than a bug. The errors are built as Prisma 7
// builds them from @prisma/adapter-pg's (the meta seen against PostgreSQL 15).
import { expect } from 'chai';
import { isDatabaseUnavailable } from '../src/db/errors.js';
import { Prisma } from '../src/generated/prisma/client.js';

const adapterError = (cause: Record<string, unknown>) =>
  new Prisma.PrismaClientKnownRequestError('Raw query failed.', {
    code: 'P2010',
    clientVersion: Prisma.prismaVersion.client,
    meta: { driverAdapterError: { name: 'DriverAdapterError', cause } },
  });
const postgres = (code: string, message: string) =>
  adapterError({ originalCode: code, originalMessage: message, kind: 'postgres', code, severity: 'FATAL', message });

describe('isDatabaseUnavailable', () => {
  it('when the server cannot be reached, then unavailable', () => {
    expect(isDatabaseUnavailable(adapterError({ kind: 'DatabaseNotReachable', host: '127.0.0.1', port: 1 }))).to.equal(true);
  });

  it('when PostgreSQL is starting up or shutting down (SQLSTATE 57P01-57P03), then unavailable', () => {
    expect(isDatabaseUnavailable(postgres('57P03', 'the database system is starting up'))).to.equal(true);
    expect(isDatabaseUnavailable(postgres('57P01', 'terminating connection due to administrator command'))).to.equal(true);
    expect(isDatabaseUnavailable(postgres('57P02', 'terminating connection because of crash of another server process'))).to.equal(true);
  });

  it('when PostgreSQL answers with a real error, then not unavailable', () => {
    expect(isDatabaseUnavailable(adapterError({ originalCode: '3D000', kind: 'DatabaseDoesNotExist', db: 'x' }))).to.equal(false);
    expect(isDatabaseUnavailable(postgres('42601', 'syntax error at or near "SELEC"'))).to.equal(false);
    expect(isDatabaseUnavailable(new Error('something else'))).to.equal(false);
  });
});
