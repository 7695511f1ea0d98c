import type { CommandModule } from 'yargs';
import { jobSchema } from '../../pipeline/job-schema.js';
import { jobReference } from '../reference.js';

interface Args {
  format: 'json' | 'markdown';
}

export const schemaCommand: CommandModule<object, Args> = {
  command: 'schema',
  describe: 'Print the JSON Schema of job files (for editors: "$schema": "./job.schema.json"), or its reference page',
  builder: (y) =>
    y
      .option('format', {
        choices: ['json', 'markdown'] as const,
        default: 'json' as const,
        describe: 'json: the JSON Schema; markdown: every job key with its type, default and meaning (docs/job-reference.md)',
      })
      .example('$0 schema > jobs/job.schema.json', 'Regenerate the schema shipped beside the jobs')
      .example('$0 schema --format markdown > docs/job-reference.md', 'Regenerate the job keys reference'),
  handler: (args) => {
    process.stdout.write(args.format === 'markdown' ? jobReference() : JSON.stringify(jobSchema(), null, 2) + '\n');
  },
};
