import { describe, expect, it } from 'vitest';
import { debianSources, sourcesFromPolicy } from '../../../src/images/debian-mirror.js';

const POLICY = `Package files:
 100 /var/lib/dpkg/status
     release a=now
 500 https://deb.nodesource.com/node_20.x nodistro/main amd64 Packages
     release o=Node Source,n=nodistro,l=Node Source,c=main,b=amd64
     origin deb.nodesource.com
 500 http://mirror.local/debian-security trixie-security/main amd64 Packages
     release v=13,o=Debian,a=stable-security,n=trixie-security,l=Debian-Security,c=main,b=amd64
     origin mirror.local
 100 http://mirror.local/debian trixie-backports/main amd64 Packages
     release o=Debian Backports,a=stable-backports,n=trixie-backports,l=Debian Backports,c=main,b=amd64
 500 http://mirror.local/debian trixie-updates/main amd64 Packages
     release v=13-updates,o=Debian,a=stable-updates,n=trixie-updates,l=Debian,c=main,b=amd64
 500 http://mirror.local/debian trixie/contrib amd64 Packages
     release v=13.1,o=Debian,a=stable,n=trixie,l=Debian,c=contrib,b=amd64
 500 http://mirror.local/debian trixie/main amd64 Packages
     release v=13.1,o=Debian,a=stable,n=trixie,l=Debian,c=main,b=amd64
Pinned packages:
`;

describe('host Debian mirror', () => {
  it("re-points the host's Debian sources at the image suite", () => {
    expect(sourcesFromPolicy(POLICY, 'bookworm')).toEqual([
      'deb http://mirror.local/debian-security bookworm-security main',
      'deb http://mirror.local/debian bookworm-updates main',
      'deb http://mirror.local/debian bookworm main',
    ]);
  });

  it("defers to mmdebstrap's defaults without a main Debian source", () => {
    expect(sourcesFromPolicy('Package files:\n 100 /var/lib/dpkg/status\n     release a=now\n', 'bookworm')).toEqual([]);
  });

  it('takes SANDBOXD_DEBIAN_MIRROR over the host', async () => {
    expect(await debianSources('bookworm', { SANDBOXD_DEBIAN_MIRROR: 'http://m/debian' })).toEqual([
      'deb http://m/debian bookworm main',
    ]);
  });
});
