// s3rver ships no type declarations; the tests use it through their own narrow helper.
declare module 's3rver';
