"""``tunekit campaign run FILE``: tune a campaign file's jobs on a Ray cluster, resuming where it stopped."""

from __future__ import annotations

import argparse
import dataclasses

from tunekit._cli.error import CliError

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Run the jobs the file declares that no earlier run finished; exit 1 when a job failed."""
    # Loaded when the command runs: at module level, every other `tunekit` command would pay ~0.3 s (rich's
    # progress, the targets' layers) at start-up.
    from tunekit._campaign.campaign import Campaign  # noqa: PLC0415 - see above
    from tunekit._campaign.spec import CampaignError  # noqa: PLC0415 - see above

    try:
        campaign = Campaign.load(args.file)
        if args.max_retries is not None:
            campaign = dataclasses.replace(campaign, max_retries=args.max_retries)
        result = campaign.run(address=args.address, progress=not args.quiet)
    except (CampaignError, ImportError) as error:  # a bad file, an unknown device kind, Ray not installed
        raise CliError(str(error)) from None
    except OSError as error:  # the records directory or the journal cannot be written (a file in the way)
        raise CliError(str(error)) from None
    for job, why in result.failed:
        print(f"failed: {job.describe()}: {why}")
    return 1 if result.failed else 0
