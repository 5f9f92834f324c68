"""`format` values we enforce, as anchored ECMA-262 patterns over the decoded string.

They go through the same translator as `pattern`, so escapes in the JSON text count as the
characters they denote. Where `jsonschema`'s format checker is exact (date, time, date-time via
rfc3339-validator, ipv4/ipv6 via `ipaddress`, uuid) the pattern accepts exactly the same strings,
calendar included (month lengths, leap years). For formats the checker treats loosely or not at all
(email, uri, hostname, duration) the pattern is a reasonable, permissive syntax check.
"""
from __future__ import annotations

from functools import lru_cache

_D2 = r'\d\d'
_MONTH_DAY = (r'(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])'
              r'|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)'
              r'|02-(?:0[1-9]|1\d|2[0-8]))')
_LEAP_YEAR = r'(?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)'
DATE = r'(?!0000)(?:\d{4}-' + _MONTH_DAY + '|' + _LEAP_YEAR + '-02-29)'
_OFFSET = r'(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)'
TIME = r'(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?' + _OFFSET
DATE_TIME = DATE + '[Tt]' + TIME
DURATION = (r'P(?:\d+W|(?=\d|T\d)(?:\d+Y)?(?:\d+M)?(?:\d+D)?'
            r'(?:T(?=\d)(?:\d+H)?(?:\d+M)?(?:\d+S)?)?)')
_OCTET = r'(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)'
IPV4 = r'(?:' + _OCTET + r'\.){3}' + _OCTET
UUID = r'[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}'
_LABEL = r'[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?'
HOSTNAME = r'(?=[^\s]{1,253}$)' + _LABEL + r'(?:\.' + _LABEL + r')*'
EMAIL = r'[^\s@]+@[^\s@]+'
URI = r'[A-Za-z][A-Za-z0-9+.\-]*:[^\s]*'


def _ipv6() -> str:
    h = '[0-9a-fA-F]{1,4}'

    def groups(k: int) -> str:
        if k == 0:
            return ''
        return h + ('(?::' + h + '){%d}' % (k - 1) if k > 1 else '')

    alts = [groups(8), groups(6) + ':' + IPV4]
    for tail_v4 in (False, True):
        room = 6 if tail_v4 else 7  # groups that may appear besides the ipv4 tail / the '::'
        for left in range(0, room + 1):
            for right in range(0, room - left + 1):
                if tail_v4:
                    r = (groups(right) + ':' if right else '') + IPV4
                else:
                    r = groups(right)
                alts.append(groups(left) + '::' + r)
    return '(?:' + '|'.join(alts) + ')'


IPV6 = _ipv6()

FORMATS: dict[str, str] = {
    'date': DATE,
    'time': TIME,
    'date-time': DATE_TIME,
    'duration': DURATION,
    'email': EMAIL,
    'idn-email': EMAIL,
    'uuid': UUID,
    'uri': URI,
    'ipv4': IPV4,
    'ipv6': IPV6,
    'hostname': HOSTNAME,
}


@lru_cache(maxsize=None)
def format_pattern(name: str) -> str | None:
    """Anchored ECMA pattern for a supported format, else None."""
    body = FORMATS.get(name)
    return None if body is None else '^(?:' + body + ')$'
