import { describe, expect, it } from 'vitest';
import { firstHostAddress } from '../../../../src/backends/docker/docker-gateway.js';

describe('firstHostAddress', () => {
  it('is the first host address of an IPv4 range, also above 128.0.0.0', () => {
    expect(firstHostAddress('172.17.0.0/16')).toBe('172.17.0.1');
    expect(firstHostAddress('172.17.5.9/16')).toBe('172.17.0.1');
    expect(firstHostAddress('192.168.100.0/24')).toBe('192.168.100.1');
    expect(firstHostAddress('10.200.0.0/12')).toBe('10.192.0.1');
    expect(firstHostAddress('203.0.113.64/26')).toBe('203.0.113.65');
  });
});
