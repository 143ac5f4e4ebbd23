import type { Migration } from 'kysely';
import { migration as m0001 } from './0001-core.js';
import { migration as m0002 } from './0002-lifecycle.js';
import { migration as m0003 } from './0003-browser-events.js';
import { migration as m0004 } from './0004-detached.js';
import { migration as m0005 } from './0005-detached-results.js';
import { migration as m0006 } from './0006-restore-origin.js';
import { migration as m0007 } from './0007-status-reason.js';
import { migration as m0008 } from './0008-objects.js';
import { migration as m0009 } from './0009-schedules.js';
import { migration as m0010 } from './0010-disk-quota.js';
import { migration as m0011 } from './0011-stores.js';
import { migration as m0012 } from './0012-policy.js';
import { migration as m0013 } from './0013-llm.js';
import { migration as m0014 } from './0014-orchestrations.js';
import { migration as m0015 } from './0015-sandbox-network.js';
import { migration as m0016 } from './0016-proxy-hooks.js';
import { migration as m0017 } from './0017-volumes.js';
import { migration as m0018 } from './0018-schedule-triggers.js';
import { migration as m0019 } from './0019-egress-ca.js';
import { migration as m0022 } from './0022-deployment-id.js';
import { migration as m0023 } from './0023-sandbox-internal.js';
import { migration as m0026 } from './0026-replicas.js';

/**
 * The core schema migrations, one file each (`NNNN-what.ts`), applied in name order at start
 * with every domain's own (DomainModule.migrations). Never edit a migration that has shipped;
 * add a new one. The names are those the store has recorded: they never change.
 */
export const MIGRATIONS: Record<string, Migration> = {
  '0001_core': m0001,
  '0002_lifecycle': m0002,
  '0003_browser_events': m0003,
  '0004_detached': m0004,
  '0005_detached_results': m0005,
  '0006_restore_origin': m0006,
  '0007_status_reason': m0007,
  '0008_objects': m0008,
  '0009_schedules': m0009,
  '0010_disk_quota': m0010,
  '0011_stores': m0011,
  '0012_policy': m0012,
  '0013_llm': m0013,
  '0014_orchestrations': m0014,
  '0015_sandbox_network': m0015,
  '0016_proxy_hooks': m0016,
  '0017_volumes': m0017,
  '0018_schedule_triggers': m0018,
  '0019_egress_ca': m0019,
  '0022_deployment_id': m0022,
  '0023_sandbox_internal': m0023,
  '0026_replicas': m0026,
};
