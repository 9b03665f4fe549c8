import csv
import json
import os
import sys
from dataclasses import fields

from django.core.management.base import BaseCommand, CommandError

from webapp.advantages.chunks import ROW_FIELDS
from webapp.advantages.config import AdvantageConfig, parse_advantage_config
from webapp.advantages.selectors import advantage_rows
from webapp.batches.services import normalized_batch_name
from webapp.models import Batch
from webapp.rankings import UNRESTRICTED

# The switch that turns off each boolean field of AdvantageConfig (each is on by default), and
# its help; a boolean field added to the config and not here fails as the options are made.
SWITCHES = {"norm_by_std": ("--no-std", "Dr. GRPO: do not divide by std"),
            "unbiased_std": ("--population-std", "std with ddof=0")}


def add_config_arguments(parser) -> None:
    """The options that override a batch's redistribution config (`export advantages` has them
    too): AdvantageConfig's `schedule`, its `params` one schedule parameter each, and a switch
    for each of its boolean fields."""
    parser.add_argument("--schedule", help="weight schedule (default: the batch's config)")
    parser.add_argument("--w-min", type=float, dest="w_min")
    parser.add_argument("--gamma", type=float)
    parser.add_argument("--m", type=int)
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--factors", help="tiered schedule factors, comma-separated")
    for name in _booleans():
        switch, text = SWITCHES[name]
        parser.add_argument(switch, action="store_true", dest=f"{name}_off", help=text)


def config_overrides(options: dict) -> dict:
    """What the options of `add_config_arguments` override, as `parse_advantage_config` reads it."""
    params = {key: options[key] for key in ("w_min", "gamma", "m", "temperature", "factors")
              if options[key] is not None}
    overrides = {"params": params}
    if options["schedule"]:
        overrides["schedule"] = options["schedule"]
    overrides.update((name, False) for name in _booleans() if options[f"{name}_off"])
    return overrides


def _booleans() -> list[str]:
    return [f.name for f in fields(AdvantageConfig) if f.type is bool]


class Command(BaseCommand):
    help = "Print one row per trajectory of a batch: GRPO and redistributed advantages."

    def add_arguments(self, parser):
        parser.add_argument("--batch", required=True)
        parser.add_argument("--format", choices=["jsonl", "csv", "table"], default="jsonl")
        add_config_arguments(parser)

    def handle(self, *args, batch, format, **options):
        try:
            batch = Batch.objects.get(name=normalized_batch_name(batch))
        except Batch.DoesNotExist:
            raise CommandError(f"no batch named {batch!r}") from None
        config = self._config(batch, options)
        rows = advantage_rows(batch, viewer=UNRESTRICTED, config=config)
        try:
            self._write(rows, format)
            self.stdout.flush()
        except BrokenPipeError:
            # The reader stopped early (`| head`): end quietly, as Unix tools do. Python's own
            # flush of stdout at exit would fail again, so stdout points at /dev/null first.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)

    def _write(self, rows, format):
        if format == "jsonl":
            for row in rows:
                self.stdout.write(json.dumps(row))
        elif format == "csv":
            writer = csv.DictWriter(self.stdout, fieldnames=ROW_FIELDS, lineterminator="\n")
            writer.writeheader()
            writer.writerows({**row, "flags": ";".join(row["flags"])} for row in rows)
        else:
            self._table(rows)

    def _config(self, batch, options):
        """The batch's config with what the options override."""
        try:
            return parse_advantage_config(config_overrides(options),
                                          base=parse_advantage_config(batch.advantage_config))
        except ValueError as error:
            raise CommandError(str(error)) from None

    def _table(self, rows):
        self.stdout.write(
            f"{'group':<28} {'traj':<10} {'rew':>4} {'label':<9} {'grpo':>8} {'factor':>6} {'rank':>4} "
            f"{'adv':>8} source"
        )
        for r in rows:
            factor = "" if r["factor"] is None else f"{r['factor']:.3f}"
            self.stdout.write(
                f"{r['group_id'][:28]:<28} {r['trajectory_id'][:10]:<10} {r['reward']:>4.1f} "
                f"{r['label']:<9} {r['grpo_advantage']:>8.4f} {factor:>6} {r['rank'] or '':>4} "
                f"{r['advantage']:>8.4f} {r['source']}"
            )
