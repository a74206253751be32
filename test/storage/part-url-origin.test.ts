// The origin the upload pages' CSP names for uploads straight to the store
// (partUrlOrigin, src/storage/direct.ts): the host the signed part URLs
// really go to, path-style or the bucket's own host name, signed locally.
import { S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { partUrlOrigin } from '../../src/storage/direct.js';
import { s3DirectStore } from '../../src/storage/s3-direct.js';

describe('the origin of the store\'s part URLs (the upload pages\' connect-src)', () => {
  const store = (publicEndpoint: string | undefined, forcePathStyle: boolean, region = 'us-east-1') => {
    const client = new S3Client({ region, credentials: { accessKeyId: 'a', secretAccessKey: 'b' } });
    return s3DirectStore({ client, bucket: 'dropstream' }, { publicEndpoint, bucket: 'dropstream', region, credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, forcePathStyle });
  };

  it('when the store is addressed path-style (S3_FORCE_PATH_STYLE, MinIO), then it is the public endpoint\'s origin, port included', async () => {
    expect(await partUrlOrigin(store('https://store.example.com:9000/', true))).to.equal('https://store.example.com:9000');
  });

  it('when the store is AWS S3 with virtual-hosted buckets, then it is the bucket\'s own host name, not the endpoint\'s', async () => {
    expect(await partUrlOrigin(store(undefined, false, 'eu-west-1'))).to.equal('https://dropstream.s3.eu-west-1.amazonaws.com');
    expect(await partUrlOrigin(store('https://s3.example.com', false))).to.equal('https://dropstream.s3.example.com');
  });
});
