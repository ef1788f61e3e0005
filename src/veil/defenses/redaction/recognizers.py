"""The recognizers veil adds to Presidio's English defaults: identifier formats Presidio ships but leaves off for
English text, and street addresses, which Presidio has no recognizer for.

Presidio's default English registry (its ``conf/default_recognizers.yaml``) leaves out recognizers that exist in the
package: UK postcodes and National Insurance numbers are disabled, and the Italian fiscal code, the Spanish NIF/NIE
and the Polish PESEL are loaded for Italian, Spanish and Polish text only. An English text that quotes one of them
releases it verbatim. veil loads them for English (:func:`extra_recognizers`), each with Presidio's own pattern and
checksum, and its context words in English next to the original ones:

* ``UK_POSTCODE`` (Presidio's ``UkPostcodeRecognizer``), ``UK_NINO`` (``UkNinoRecognizer``);
* ``IT_FISCAL_CODE`` (``ItFiscalCodeRecognizer``, its check character), ``ES_NIF`` / ``ES_NIE``
  (``EsNifRecognizer`` / ``EsNieRecognizer``, their control letter), ``PL_PESEL`` (``PlPeselRecognizer``, its
  check digit).

``US_SSN``: Presidio's ``UsSsnRecognizer`` is enabled, but it throws away a match that is a published sample number
(``123-45-6789``), has an all-zero group, an area number that was never issued (``000``, ``666``) or all-equal
digits. Those rules make a detector more precise; for a redactor they release a number written in an SSN's shape,
next to the word "SSN", that the writer may well have typed as their own (a typo, an old or a made-up number:
whoever reads it cannot tell either). veil's :class:`RedactingSsnRecognizer` keeps the patterns and context words and
drops only a match with mixed separators (``123-45.6789``: not an SSN's layout).

``STREET_ADDRESS`` (veil's own :class:`~presidio_analyzer.PatternRecognizer`, :data:`ADDRESS_PATTERNS`): a house
number with a street name and type in the layouts of English (``221B Baker Street``, ``Flat 4 Arnold Oval``),
French (``14 rue de Rivoli``), Italian, Spanish and Portuguese (``via Roma 10``, ``Calle Mayor, 5``), German and
Dutch (``Hauptstraße 5``, ``Kerkstraat 12``) and Polish (``ul. Marszałkowska 84/92``). The street types are the
postal standards' lists (USPS Publication 28 suffixes and the usual British ones; the French, Italian, Spanish,
Portuguese, German, Dutch and Polish street types). Names must be capitalised and a number is required except after
a type word that is not an English word (``rue``, ``ul.``): the patterns miss lower-case street names and addresses
without a number, and can take a title that looks like an address ("2012 Wall Street") for one. Their recall and
their detections on sentences without an address are measured on a held-out injection set
(:mod:`veil.experiments.redaction.formats`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["extra_recognizers", "RedactingSsnRecognizer", "ADDRESS_PATTERNS", "ADDRESS_CONTEXT", "EXTRA_ENTITIES"]

#: the entity types veil adds (beyond what Presidio's English defaults detect)
EXTRA_ENTITIES = ("UK_POSTCODE", "UK_NINO", "IT_FISCAL_CODE", "ES_NIF", "ES_NIE", "PL_PESEL", "STREET_ADDRESS")

# --------------------------------------------------------------------------- street addresses
_CAP = r"\p{Lu}[\p{L}\p{M}'’.]*(?:-\p{L}[\p{L}\p{M}'’.]*)*"  # a capitalised word (hyphenated parts allowed)
_NUM = r"\d{1,5}(?:\s?[A-Za-z](?![\p{L}\d]))?(?:\s?[-/]\s?\d{1,5}[A-Za-z]?)?"  # 221B, 84/92, 9-5, 12 a
_PARTICLE = (r"(?:de|di|da|do|du|des|del|dei|della|delle|dello|degli|dal|dalla|dos|das|la|le|les|las|los|lo|y|e|i|"
             r"von|van|der|den|ter|het|l'|d')")
#: up to five capitalised words, with name particles (``de``, ``della``, ``van``) between them
_NAME = rf"{_CAP}(?:\s+(?:{_PARTICLE}\s+)?{_CAP}){{0,4}}"
_NAME_AFTER_TYPE = rf"(?:(?:{_PARTICLE}\s+)|(?:l'|d'))?(?:{_NAME}|\d{{1,2}}\s+{_CAP})"

# USPS Publication 28 (appendix C1) primary street suffixes and abbreviations, and the usual British street types
_EN_TYPES = (
    "alley|allee|aly|annex|anex|arcade|arc|avenue|ave|av|bayou|beach|bend|bluffs?|bottom|boulevard|blvd|branch|"
    "bridge|brooks?|burgs?|bypass|byp|camp|canyon|cape|causeway|centers?|centre|circles?|cir|circus|cliffs?|close|"
    "club|commons?|corners?|course|courts?|ct|coves?|creek|crescent|cres|crest|crossing|crossroads?|curve|dale|dam|"
    "divide|drives?|dr|embankment|estates?|expressway|expy|extensions?|falls?|ferry|fields?|flats?|fords?|forest|"
    "forges?|forks?|fort|freeway|fwy|gardens?|gate|gateway|glens?|greens?|groves?|harbors?|harbours?|haven|heights|"
    "hts|highway|hwy|hills?|hollow|inlet|islands?|isle|junctions?|keys?|knolls?|lakes?|land|landing|lane|ln|lights?|"
    "loaf|locks?|lodge|loop|mall|manors?|meadows?|mews|mills?|mission|motorway|mount|mountains?|neck|orchard|oval|"
    "overpass|parade|parks?|parkways?|pkwy|pass|passage|path|pike|pines?|place|pl|plains?|plaza|points?|ports?|"
    "prairie|quay|radial|ramp|ranch|rapids?|rest|ridges?|rise|river|roads?|rd|route|row|rue|run|shoals?|shores?|"
    "skyway|springs?|spurs?|squares?|sq|station|stravenue|stream|streets?|st|terrace|ter|throughway|trace|"
    "track|trafficway|trail|trl|trailer|tunnel|turnpike|underpass|unions?|valleys?|via|viaduct|views?|villages?|"
    "ville|vista|walks?|wall|way|wells?|wharf|yard")
#: the types that count written in lower case too ("12 Baker street"); the others must be capitalised
_EN_COMMON = "street|st|road|rd|avenue|ave|lane|ln|drive|dr|boulevard|blvd"
_EN_UNIT = r"(?:flat|studio|apartment|apt\.?|unit|suite|ste\.?|room|rm\.?|floor|fl\.?|no\.?|#)"
_EN_ADDRESS = (rf"\b(?:(?i:{_EN_UNIT})\s*\d{{1,4}}[A-Za-z]?,?\s+(?:{_NUM}\s+)?|{_NUM}\s+)"
               rf"(?:{_CAP}\s+){{1,3}}(?:(?=\p{{Lu}})(?i:{_EN_TYPES})|(?:{_EN_COMMON}))\b(?!['’]\p{{L}})\.?"
               rf"(?:\s+(?:N|S|E|W|NE|NW|SE|SW)\b\.?)?"
               rf"(?:,?\s+(?i:{_EN_UNIT})\s*\d{{1,5}}[A-Za-z]?\b)?")

# French street types (the types of the Base Adresse Nationale); after a house number, or alone for the unambiguous
_FR_TYPES = (r"rue|avenue|av\.|boulevard|bd|bld|place|pl\.|chemin|ch\.|allée|allee|impasse|imp\.|quai|cours|route|"
             r"rte|passage|square|sentier|voie|rond-point|esplanade|faubourg|fbg|promenade|villa|cité|cite|hameau|"
             r"lieu-dit|parvis|traverse|montée|côte|ruelle|carrefour|résidence|residence|mail|port|clos")
_FR_ALONE = r"[Rr]ue|[Bb]oulevard|[Cc]hemin|[Aa]llée|[Ii]mpasse|[Qq]uai|[Ff]aubourg|[Rr]uelle|avenue"
_FR_NAME = rf"(?:(?:de\s+la|de\s+l'|des|du|de|d'|la|le|les|l')\s*)?{_NAME}"
_FR_ADDRESS = (rf"\b(?:\d{{1,4}}(?:\s?(?i:bis|ter|quater|[a-d])\b)?,?\s+(?i:{_FR_TYPES})\s+{_FR_NAME}"
               rf"|(?<![\p{{L}}\d])(?:{_FR_ALONE})\s+{_FR_NAME})")

# Italian (the DUG of the national street register), Spanish (the INE's types of street) and Portuguese (Brazil's
# logradouros) street types: TYPE NAME[,] NUMBER [unit]
_ROMANCE_TYPES = (
    r"via|viale|v\.le|piazza|p\.za|p\.zza|piazzale|piazzetta|corso|c\.so|largo|vicolo|vico|strada|contrada|c\.da|"
    r"borgo|località|loc\.|frazione|fraz\.|lungomare|lungotevere|lungarno|salita|discesa|rione|traversa|stretto|"
    r"galleria|canale|campo|fondamenta|rotonda|incrocio|circonvallazione|calle|c/|c\.|avenida|avda\.?|paseo|plaza|"
    r"pza\.?|camino|carretera|ctra\.?|ronda|travesía|travesia|glorieta|pasaje|psje\.?|alameda|rambla|callejón|"
    r"callejon|cuesta|costanilla|urbanización|urbanizacion|urb\.|vía|vial|cañada|acceso|pasadizo|bulevar|carrera|"
    r"sector|polígono|poligono|barrio|colonia|plazuela|calleja|senda|subida|bajada|riera|muelle|explanada|"
    r"prolongación|prolongacion|partida|paraje|rua|r\.|travessa|tv\.|praça|praca|pça\.|estrada|rodovia|rod\.|"
    r"vila|beco|ladeira|largo|parque|pátio|patio|quadra|recanto|residencial|setor|sítio|sitio|trecho|trevo|vale|"
    r"vereda|viela|viaduto|passarela|passagem|praia|chácara|chacara|colônia|conjunto|distrito|esplanada|estação|"
    r"favela|fazenda|feira|jardim|lago|lagoa|loteamento|morro|núcleo|quinta|condomínio|aeroporto|área|avenida")
_ROMANCE_UNIT = r"(?:appartamento|app\.?|interno|int\.?|scala|piano|piso|puerta|pta\.?|apt\.?|bajo|escalera|esc\.?|" \
                r"apto\.?|sala|casa|bloco|lote)"
_ROMANCE_ADDRESS = (rf"(?<![\p{{L}}\d.])(?i:{_ROMANCE_TYPES})\s+{_NAME_AFTER_TYPE},?\s*(?:(?i:n\.?|nº|n°|no\.?)\s*)?"
                    rf"{_NUM}\b(?:\s+(?i:{_ROMANCE_UNIT})\s*\d{{1,4}}[A-Za-z]?\b)?")

# German, Austrian, Swiss and Dutch: a compound ending in the street type, or NAME TYPE, then the house number
# ("ring" not after a vowel: English "-ering", "-uring" words such as "Engineering 101" are not streets)
_GERMANIC_TYPES = (r"straße|strasse|str\.|weg|gasse|platz|allee|(?<![aeiouyäöü])ring|damm|ufer|chaussee|steig|pfad|"
                   r"markt|graben|promenade|stieg|twiete|kamp|wall|zeile|steinweg|straat|laan|plein|gracht|kade|dreef|"
                   r"pad|steeg|singel|dijk|boulevard|hof|park|baan|plantsoen|wal")
_GERMANIC_ADDRESS = (rf"\b(?:\p{{Lu}}[\p{{L}}\p{{M}}-]{{2,}}(?i:{_GERMANIC_TYPES})|(?:{_CAP}\s+)+"
                     rf"(?:Straße|Strasse|Str\.|Weg|Gasse|Platz|Allee|Ring|Damm|Ufer|Chaussee|Markt|Laan|Straat|"
                     rf"Plein|Gracht|Kade))\s*{_NUM}\b")

# Polish: the street type (abbreviated or not), the name, the house number (optional after an abbreviation)
_PL_ADDRESS = (rf"(?<![\p{{L}}\d])(?:(?i:ul\.|al\.|pl\.|os\.)\s*{_NAME}(?:\s+[IVX]+)?(?:\s+{_NUM}\b)?"
               rf"|(?i:ulica|ulicy|aleja|alei|plac|placu|osiedle|rondo|skwer|bulwar)\s+(?:\d{{1,2}}\s+)?{_NAME}"
               rf"(?:\s+[IVX]+)?\s+{_NUM}\b)")

#: the address patterns (name, regex, score): see the module docstring
ADDRESS_PATTERNS = (("street address (English)", _EN_ADDRESS, 0.4),
                    ("street address (French)", _FR_ADDRESS, 0.4),
                    ("street address (Italian, Spanish, Portuguese)", _ROMANCE_ADDRESS, 0.4),
                    ("street address (German, Dutch)", _GERMANIC_ADDRESS, 0.4),
                    ("street address (Polish)", _PL_ADDRESS, 0.4))
ADDRESS_CONTEXT = ("address", "street", "live", "lives", "living", "lived", "located", "located at", "send",
                   "deliver", "delivery", "ship", "shipping", "mail", "post", "visit", "home", "office", "moved",
                   "adresse", "indirizzo", "dirección", "direccion", "endereço", "adres", "anschrift")


def _address_recognizer() -> Any:
    import regex
    from presidio_analyzer import Pattern, PatternRecognizer

    return PatternRecognizer(supported_entity="STREET_ADDRESS", name="VeilStreetAddressRecognizer",
                             patterns=[Pattern(n, r, s) for n, r, s in ADDRESS_PATTERNS],
                             context=list(ADDRESS_CONTEXT), supported_language="en",
                             global_regex_flags=regex.MULTILINE)  # case matters: names are capitalised


# --------------------------------------------------------------------------- identifiers
def _ssn_class() -> Any:
    from presidio_analyzer.predefined_recognizers import UsSsnRecognizer

    class RedactingSsn(UsSsnRecognizer):
        """Presidio's SSN recognizer that drops only a match with mixed separators (module docstring)."""

        def invalidate_result(self, pattern_text: str) -> bool:
            return len({c for c in pattern_text if c in ".- "}) > 1

    RedactingSsn.__name__ = RedactingSsn.__qualname__ = "RedactingSsnRecognizer"
    return RedactingSsn


def RedactingSsnRecognizer() -> Any:  # noqa: N802 - a factory: presidio_analyzer is imported lazily
    """Presidio's ``UsSsnRecognizer`` (its patterns and context words) keeping every match in an SSN's layout."""
    return _ssn_class()(name="RedactingSsnRecognizer")


#: Presidio recognizers loaded for English with their own context words plus these
_ENGLISH_CONTEXT = {
    "UkPostcodeRecognizer": (),
    "UkNinoRecognizer": ("national insurance number", "insurance", "ni"),
    "ItFiscalCodeRecognizer": ("codice fiscale", "cf", "fiscal code", "tax code", "italian tax", "tax id", "tax"),
    "EsNifRecognizer": ("documento nacional de identidad", "dni", "nif", "identificación", "identity card",
                        "national id", "id number", "tax id", "spanish id"),
    "EsNieRecognizer": ("número de identificación de extranjero", "nie", "foreigner", "residence", "id number",
                        "spanish id"),
    "PlPeselRecognizer": ("pesel", "national id", "id number", "identification number", "polish id"),
}


def extra_recognizers() -> list[Any]:
    """The recognizers veil adds to Presidio's English registry (module docstring), new instances."""
    from presidio_analyzer import predefined_recognizers as pr

    out = [RedactingSsnRecognizer()]
    for name, extra in _ENGLISH_CONTEXT.items():
        cls = getattr(pr, name)
        context = list(dict.fromkeys([*cls.CONTEXT, *extra]))
        out.append(cls(supported_language="en", context=context))
    out.append(_address_recognizer())
    return out
