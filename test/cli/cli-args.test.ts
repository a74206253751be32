// The CLI's shared parsing (src/cli/args.ts, src/cli/units.ts) without a
// process: typo hints, errors in the command's terms, sizes and times.
import { expect } from 'chai';
import { closest, editDistance, HelpShown, parseCommand, UsageError, type Command } from '../../src/cli/args.js';
import { parseSeconds, parseSize } from '../../src/cli/units.js';

const COMMAND: Command = {
  name: 'accounts create',
  usage: 'accounts create --plan <name> [--email <email>]',
  summary: 'Creates an account.',
  options: { plan: { type: 'string' }, email: { type: 'string' }, force: { type: 'boolean' } },
};

function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error('did not throw');
}

describe('CLI argument parsing', () => {
  describe('closest', () => {
    it('when two letters are swapped, then it is one edit and the option is suggested', () => {
      expect(editDistance('emial', 'email')).to.equal(1);
      expect(closest('emial', ['plan', 'email'])).to.equal('email');
    });

    it('when nothing is near, then nothing is suggested', () => {
      expect(closest('bogus', ['plan', 'email'])).to.equal(undefined);
      // A short name allows one edit only.
      expect(closest('pxx', ['plan'])).to.equal(undefined);
    });
  });

  describe('parseCommand', () => {
    it('when an option is unknown, then the error names it and the command, suggests the near one, and carries the usage (exit 2)', () => {
      const err = thrown(() => parseCommand(COMMAND, ['--plan', 'pro', '--emial', 'x@example.com']));
      expect(err).to.be.instanceOf(UsageError);
      expect((err as UsageError).exitCode).to.equal(2);
      expect(err.message).to.equal('unknown option --emial for `accounts create`; did you mean --email?\nusage: dropstream accounts create --plan <name> [--email <email>]');
    });

    it('when a value is missing or given to a boolean, then the error says which', () => {
      expect(thrown(() => parseCommand(COMMAND, ['--plan'])).message.split('\n')[0]).to.equal('--plan needs a value for `accounts create`');
      expect(thrown(() => parseCommand(COMMAND, ['--force=yes'])).message.split('\n')[0]).to.equal('--force takes no value for `accounts create`');
    });

    it('when a negative number follows a string option, then it is that option\'s value', () => {
      expect(parseCommand(COMMAND, ['--plan', '-5']).values.plan).to.equal('-5');
    });

    it('when --help or -h is given, then help is shown with the usage and summary', () => {
      for (const flag of ['--help', '-h']) {
        const err = thrown(() => parseCommand(COMMAND, [flag, '--bogus-after']));
        // --help wins only if parsing succeeds; an unknown flag is still a mistake.
        expect(err).to.be.instanceOf(UsageError);
        const help = thrown(() => parseCommand(COMMAND, [flag]));
        expect(help).to.be.instanceOf(HelpShown);
        expect((help as HelpShown).text).to.equal('usage: dropstream accounts create --plan <name> [--email <email>]\n\nCreates an account.\n');
      }
    });

    it('when there are more or fewer arguments than the command takes, then the error says so with the usage', () => {
      expect(thrown(() => parseCommand(COMMAND, ['extra'])).message.split('\n')[0]).to.equal('unexpected argument "extra" for `accounts create`');
      const two: Command = { ...COMMAND, name: 'links revoke', usage: 'links revoke <file-id> <link-id>', positionals: { min: 2, max: 2 } };
      expect(thrown(() => parseCommand(two, ['1'])).message.split('\n')[0]).to.equal('`links revoke` needs 2 arguments');
    });
  });

  describe('sizes and times', () => {
    it('when a size has a unit, then it is bytes in binary units, however the unit is spelt', () => {
      expect(parseSize('s', '1048576')).to.equal(1_048_576);
      expect(parseSize('s', '64KiB')).to.equal(65_536);
      expect(parseSize('s', '10GiB')).to.equal(10 * 2 ** 30);
      expect(parseSize('s', '10GB')).to.equal(10 * 2 ** 30);
      expect(parseSize('s', '1.5 TiB')).to.equal(1.5 * 2 ** 40);
      expect(parseSize('s', '1m')).to.equal(2 ** 20);
    });

    it('when a size is not one, then the flag and the value are named', () => {
      expect(thrown(() => parseSize('max-total-size', '10XB')).message).to.equal('--max-total-size must be a size such as 1048576, 64KiB or 10GiB, not "10XB"');
      expect(() => parseSize('s', '-5')).to.throw('--s must be a size');
      expect(() => parseSize('s', '99999999999TiB')).to.throw('--s must be a size');
    });

    it('when a time has a unit, then it is whole seconds; zero and negatives are refused', () => {
      expect(parseSeconds('t', '3600')).to.equal(3600);
      expect(parseSeconds('t', '90m')).to.equal(5400);
      expect(parseSeconds('t', '12h')).to.equal(43_200);
      expect(parseSeconds('t', '7d')).to.equal(604_800);
      expect(() => parseSeconds('t', '0')).to.throw('--t must be a time');
      expect(() => parseSeconds('t', '-5')).to.throw('--t must be a time');
      expect(() => parseSeconds('t', '1.5h')).to.throw('--t must be a time');
    });
  });
});
