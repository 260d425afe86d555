"""Two configurations measured at once, one on each machine, where placement gives each machine CPUs of its own
(or --schedule parallel asks for it). The analysis says ahead which configurations it reads next
(lab/ablation/analysis.py prefetch); they are measured two at a time, and an odd one out takes as its partner a
configuration the analysis will read later anyway (the leave-one-out set is known from the start), else both
machines carry it. A pair's trials are split in two halves and the machines swap configurations between them, so
that what differs between the two machines is not taken for what differs between the two configurations.
Which configurations went together is kept in ablation.json (pairs), so that --resume finishes a pair cut short
before it pairs anything else."""
from __future__ import annotations

from collections.abc import Callable

from lab.ablation.analysis import Config, wanted
from lab.ablation.folder import Ablation, config_from_key, key
from lab.ablation.groups import Group
from lab.analysis.repeated import counted_trials
from lab.runfolder import RunFolder

# load(folder, the configuration on each machine, trials): each machine given its configuration, then both loaded at
# once into folder
Load = Callable[[RunFolder, dict[str, Config], int], None]


def halves(repeat: int) -> tuple[int, int]:
    """A pair's trials with each machine carrying each configuration: the first half, then the swapped one."""
    return (repeat + 1) // 2, repeat // 2


def partners(todo: list[Config], ahead: list[Config]) -> list[tuple[Config, Config]]:
    """todo two at a time, in its order; an odd one out is paired with the first of ahead not in todo (a
    configuration read later anyway), else with itself."""
    todo = list(dict.fromkeys(todo))
    found = [(todo[i], todo[i + 1]) for i in range(0, len(todo) - 1, 2)]
    if len(todo) % 2:
        found.append((todo[-1], next((config for config in ahead if config not in todo), todo[-1])))
    return found


def orientations(pair: tuple[Config, Config], repeat: int) -> list[tuple[dict[str, Config], int]]:
    """Each half of a pair's trials: the configuration on each machine, and how many trials. One configuration on
    both machines gives two figures a trial: half the trials give as many figures."""
    first, second = halves(repeat)
    a, b = pair
    if a == b:
        return [({"default": a, "tuned": a}, first)]
    return [({"default": a, "tuned": b}, first), ({"default": b, "tuned": a}, second)]


class Pairs:
    """Measures the configurations the analysis asks for, two at a time, into the ablation's pairs/."""

    def __init__(self, ablation: Ablation, groups: dict[str, Group], repeat: int, load: Load):
        self.ablation, self.groups, self.repeat, self.load = ablation, groups, repeat, load
        self.attempted: set[tuple[Config, Config]] = set()    # the pairs this run measured (or began to)

    def recorded(self) -> list[tuple[Config, Config]]:
        return [(config_from_key(a), config_from_key(b)) for a, b in self.ablation.record().get("pairs") or []]

    def _half_done(self, on: dict[str, Config], trials: int) -> bool:
        """A half measured to its end, with as many trials counted (a figure on both machines) as it planned."""
        folder = self.ablation.pair_folder(on["default"], on["tuned"])
        return self.ablation.finished(folder) and len(counted_trials(folder)) >= trials

    def _pair_done(self, pair: tuple[Config, Config]) -> bool:
        return all(self._half_done(on, trials) for on, trials in orientations(pair, self.repeat))

    def done(self, config: Config) -> bool:
        """Measured: every half of a pair it is in ended, and it has figures enough (a half with fewer trials
        counted than planned is measured again only when its configurations lack figures)."""
        halves_ended = any(config in pair and all(
            self.ablation.finished(self.ablation.pair_folder(on["default"], on["tuned"]))
            for on, _trials in orientations(pair, self.repeat)) for pair in self.recorded())
        return halves_ended and self.ablation.counted(config) >= 2

    def _pending(self, config: Config) -> bool:
        """To be measured in this run: one this run measured that still lacks figures is not measured again
        (figures() says why)."""
        return not self.done(config) and not any(config in pair for pair in self.attempted)

    def prefetch(self, configs: list[Config]) -> None:
        """Every configuration of configs measured: those in a pair cut short finish it, the rest are paired."""
        todo = [config for config in dict.fromkeys(configs) if not self.done(config)]
        for pair in self.recorded():
            if set(pair) & set(todo) and not self._pair_done(pair) and pair not in self.attempted:
                self._measure(pair)
        todo = [config for config in todo if self._pending(config)]
        ahead = [config for config in wanted(self.groups) if self._pending(config)]
        for pair in partners(todo, ahead):
            self.ablation.update(pairs=[*(self.ablation.record().get("pairs") or []), [key(pair[0]), key(pair[1])]])
            self._measure(pair)

    def figures(self, config: Config) -> list[float]:
        self.prefetch([config])
        return self.ablation.figures(config)

    def _measure(self, pair: tuple[Config, Config]) -> None:
        self.attempted.add(pair)
        for on, trials in orientations(pair, self.repeat):
            if self._half_done(on, trials):
                continue
            folder = self.ablation.pair_folder(on["default"], on["tuned"])
            self.ablation.set_aside(folder)
            self.load(folder, on, trials)
