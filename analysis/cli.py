"""The command lines' shared help format: each flag's default is shown, unless it has none
(its help says what happens then)."""

import argparse


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)
