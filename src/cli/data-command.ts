import { Command } from 'commander';
import type { Config } from '../config/config-schema.js';
import { configFromOptions, fail } from './cli-config.js';

/** The options every command on the data directory takes, as `serve` does. */
function dataDirCommand(name: string): Command {
  return new Command(name)
    .option('--config <file>', 'TOML configuration file, as for serve')
    .option('--data-dir <dir>', 'state directory (SERVICE_DATA_DIR)')
    .option('--database-url <url>', 'the PostgreSQL database of the state, as for serve (SERVICE_DATABASE_URL)')
    .option('--secret-key-file <file>', 'the key that encrypts secrets at rest, if not <data-dir>/secret.key');
}

/**
 * Runs `work` with the configuration of the parsed options (after printing what to fix, it runs
 * nothing), printing a refusal the store explains (a lock, a newer database, a bad backup) as
 * `sandboxd: <message>` with exit code 2.
 */
async function refusing(opts: Record<string, unknown>, work: (config: Config) => Promise<void>): Promise<void> {
  const config = configFromOptions(opts);
  if (!config) return;
  const [{ DataDirLockedError }, { DatabaseNewerError }, { BackupError }, { DatabaseUnreachableError }] = await Promise.all([
    import('../state/data-dir-lock.js'),
    import('../state/migration-state.js'),
    import('../state/backup.js'),
    import('../state/postgres.js'),
  ]);
  try {
    await work(config);
  } catch (err) {
    if (err instanceof DataDirLockedError || err instanceof DatabaseNewerError || err instanceof BackupError || err instanceof DatabaseUnreachableError) return fail(err.message);
    throw err;
  }
}

/**
 * `migrate`, `backup` and `restore`: the embedded SQLite of a data directory, without a server
 * (`backup` also beside a running one). Their modules load when they run, as serve's do.
 */
export function dataCommands(): Command[] {
  const migrate = dataDirCommand('migrate')
    .description("apply the database's pending migrations (serve applies them too); --dry-run lists them")
    .option('--dry-run', 'list the applied and pending migrations, change nothing')
    .action(async ({ dryRun, ...opts }: Record<string, unknown>) => {
      await refusing(opts, async (config) => {
        const [{ allMigrations }, { openStore }, { migrationReport }] = await Promise.all([
          import('../services/domains.js'),
          import('../state/store.js'),
          import('../state/migration-state.js'),
        ]);
        if (dryRun) return void process.stdout.write(await migrationReport(config.dataDir, allMigrations(), config.databaseUrl));
        const store = await openStore(config.dataDir, allMigrations(), { databaseUrl: config.databaseUrl });
        await store.close();
        process.stdout.write(
          store.migrated.length > 0 ? `applied ${store.migrated.length}: ${store.migrated.join(', ')}\n` : `${store.location}: the database is up to date\n`,
        );
      });
    });
  const backup = dataDirCommand('backup')
    .description('copy the data directory into a new directory, online: the server may run meanwhile')
    .argument('<dir>', 'a new or empty directory')
    .action(async (dest: string, opts: Record<string, unknown>) => {
      await refusing(opts, async (config) => {
        const { backupDataDir } = await import('../state/backup.js');
        const manifest = backupDataDir(config, dest);
        const bytes = manifest.files.reduce((sum, file) => sum + file.bytes, 0);
        process.stdout.write(`backed up ${config.dataDir} to ${dest}: ${manifest.files.map((file) => file.path).join(', ')} (${bytes} bytes)\n`);
      });
    });
  const restore = dataDirCommand('restore')
    .description("replace the data directory's state with a backup; the server must be stopped")
    .argument('<dir>', 'a directory that `sandboxd backup` wrote')
    .action(async (src: string, opts: Record<string, unknown>) => {
      await refusing(opts, async (config) => {
        const [{ restoreDataDir }, { allMigrations }] = await Promise.all([import('../state/backup.js'), import('../services/domains.js')]);
        const { manifest, previous } = await restoreDataDir(config, src, allMigrations());
        process.stdout.write(
          `restored the backup of ${manifest.created_at} (sandboxd ${manifest.version}) into ${config.dataDir}` +
            (previous ? `; its previous files are in ${previous}/` : '') +
            '\nthe next serve applies pending migrations and reconciles the sandboxes with the engine\n',
        );
      });
    });
  return [migrate, backup, restore];
}
