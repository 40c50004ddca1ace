"""Domain ``people``: a composer and a scientist, both invented (first name and surname are invented words).
Questions are marked with *.

* ``composer`` (12 paragraphs, 9 questions): overview naming the composer (birth town, birth year*, works, a
  critic); papers and the critical edition; youth (composition teacher*, a prize); operas (the first opera*, its
  librettist); the court post (which court*); symphonies (the third's subtitle*, who completed the last); songs and
  chamber music; travels and letters (how many survive*, publisher); family (spouse*, the house museum); pupils
  (piano maker, lesson fee); death and legacy (cemetery, pupils of the music school*, festival); recordings and the
  catalogue (the musicologist*). Later paragraphs say "the composer", "he" or "she".
* ``scientist`` (12 paragraphs, 9 questions): overview naming the scientist (field, birth town, birth year*,
  laboratory, textbooks); a polar expedition; education (thesis supervisor*, a sea laboratory, an observatory); the
  discovery (its name*); the institute directed*; publications (co-author of the most cited paper*); a controversy
  (rival, letters); honours (a prize*, a medal); students (doctoral students*, the best known); private life
  (spouse*, roses, summits); public life (research agency, radio talks); death and legacy (notebooks, the
  biographer*). Later paragraphs say "the scientist", "he" or "she".

A discovery or prize is named with an invented word that is not the scientist's name ("the Tarvik effect"): an
eponym would name the entity outside the head.
"""

from __future__ import annotations

from curation.sources.controlled.template import (
    FEW,
    MANY,
    MONTHS,
    PERSON,
    PLACE,
    SEVERAL,
    Choice,
    Later,
    Name,
    Number,
    Template,
    Year,
)

INVENTED_PERSON = Name(("{W} {W}",))

COMPOSER = Template(
    name="composer",
    domain="people",
    noun="composer",
    entity=INVENTED_PERSON,
    person=True,
    paragraphs=(
        "{entity} was a composer and {second_role} of the late romantic era, born in {birth_town} in {birth_year}. "
        "{He} wrote {opus_count}, among them operas, symphonies and a large body of songs, and {he} directed the "
        "court orchestra of a small principality for most of {his} career. Critics of the time, led by {critic}, "
        "praised {his} long melodies and {his} bold writing for the brass.",
        "The composer's papers, about {papers_pages} pages of sketches and drafts, were bought by the national "
        "library from the last descendants of the family and are kept in its music room. A critical edition of the "
        "complete works, begun under the editor {editor}, has so far reached {edition_volumes} and is expected to "
        "be finished within the decade.",
        "The composer grew up in a family of musicians: {his} father, a cantor, began teaching {him} at the age of "
        "{first_lessons}. At sixteen {he} entered the conservatory of the capital, where {he} studied composition "
        "with {teacher}. {His} graduation piece, a string quartet, won the {prize} and was published by a local "
        "firm the following year. The teacher later called that student the most gifted pupil of a long career.",
        "The first opera, {opera}, was staged in {opera_premiere} and ran for {performances}, an unusual success "
        "for a young composer. A second opera, based on a folk legend, failed at its premiere but was revived with "
        "great success half a century later. The librettist of most of the stage works was the poet {librettist}, a "
        "friend from the conservatory. The overture of the first opera is still a favourite opening piece of "
        "concert programmes.",
        "In {court_year} the composer was appointed director of music at the court of {court}, a post held for "
        "{court_years} years. The orchestra grew from {orchestra_start} to {orchestra_end}, and the court theatre "
        "gave the first performances of {his} symphonies. The prince paid a salary of {salary} a year and allowed "
        "long summer tours abroad. The court records list every rehearsal and every payment to the players.",
        "There are {symphonies} symphonies. The third, subtitled the {symphony_title}, is the most often played "
        "today; its slow movement quotes a hymn from the composer's childhood. The score of the last symphony, "
        "unfinished at {his} death, was completed by {completer} and first performed in {completion_year} to a full "
        "house.",
        "The composer wrote about {songs}, setting poems by the leading writers of the day, and they were sung in "
        "drawing rooms across the continent. The chamber music includes {quartets} string quartets and a piano trio "
        "dedicated to the cellist {cellist}, who gave the first performance with the composer at the piano in a "
        "hall that held no more than {trio_audience}.",
        "The composer travelled widely, giving concerts in {cities_visited} in a single season and meeting many of "
        "the leading musicians of the day. More than {letters} survive, most of them to {his} publisher, "
        "{publisher}, and they describe rehearsals, quarrels with singers and the hardships of winter journeys by "
        "coach.",
        "The composer married the singer {spouse} in {marriage_year}, and the couple had {children} children, one "
        "of whom became a painter. The family lived in a house by the lake at {house_town}, which is now a small "
        "museum holding {his} piano, {his} desk and about {autographs}.",
        "As a teacher the composer took few pupils but shaped them deeply; the best known, {pupil}, later became "
        "the director of the conservatory in the capital. Lessons were given in the music room of the lake house, "
        "at a piano built by {piano_maker}, on {lesson_days} mornings a week and often went on until dinner, with "
        "long walks along the shore in between, and the fee was {lesson_fee} a lesson or, from poorer pupils, a "
        "basket of fruit.",
        "The composer died in {death_year} after a short illness and was buried in the cemetery of {cemetery_town}, "
        "while mourners lined the road from the lake house. A music school founded in {his} name has "
        "{school_pupils}, and a festival devoted to {his} works is held each {festival_month}, drawing about "
        "{festival_visitors} visitors to the lake.",
        "The complete symphonies were first recorded in {recording_year} by a radio orchestra under {conductor}, "
        "and that set is still regarded as a reference. The catalogue of the works, compiled by the musicologist "
        "{musicologist}, lists {catalogue_numbers}. A film about {his} life won a prize at a festival and brought "
        "the songs back into fashion.",
    ),
    slots={
        "second_role": Choice(("pianist", "conductor", "organist", "violinist")),
        "birth_town": PLACE,
        "birth_year": Year(1790, 1909),
        "opus_count": Number(90, 640, unit=" works"),
        "lesson_fee": Number(5, 150, unit=" thalers"),
        "critic": PERSON,
        "piano_maker": Name(("{W} and Sons", "{W} Pianos")),
        "cemetery_town": PLACE,
        "papers_pages": Number(2_000, 29_000, step=50),
        "editor": PERSON,
        "edition_volumes": Number(12, 140, unit=" volumes"),
        "first_lessons": Choice(("four", "five", "six", "seven")),
        "teacher": PERSON,
        "prize": Name(("{W} Prize", "{W} Medal")),
        "opera": Name(("The {W} Bride", "The Siege of {W}", "Queen {W}", "The Lady of {W}")),
        "opera_premiere": Later("birth_year", 20, 35),
        "performances": Number(30, 290, unit=" performances"),
        "librettist": PERSON,
        "court_year": Later("birth_year", 26, 40),
        "court": PLACE,
        "court_years": Choice(("eleven", "fourteen", "nineteen", "twenty-two", "twenty-seven", "thirty-one")),
        "orchestra_start": Choice(("eighteen", "twenty", "twenty-four", "thirty")),
        "orchestra_end": Number(41, 140, unique=False, unit=" players"),
        "salary": Number(800, 9_900, step=10, unit=" thalers"),
        "symphonies": Choice(("four", "five", "six", "seven", "nine")),
        "symphony_title": Name(("{W} Symphony",)),
        "completer": PERSON,
        "completion_year": Later("birth_year", 70, 110),
        "songs": Number(120, 690, unit=" songs"),
        "quartets": FEW,
        "cellist": PERSON,
        "trio_audience": Number(80, 390, unique=False, unit=" listeners"),
        "cities_visited": Number(12, 140, unit=" cities"),
        "letters": Number(400, 4_900, step=5, unit=" letters"),
        "publisher": Name(("{first} {W}", "the house of {W}")),
        "spouse": PERSON,
        "marriage_year": Later("birth_year", 22, 38),
        "children": FEW,
        "house_town": PLACE,
        "autographs": Number(40, 390, unit=" autograph scores"),
        "pupil": PERSON,
        "lesson_days": FEW,
        "death_year": Later("birth_year", 45, 85),
        "school_pupils": Number(120, 1_900, step=5, unit=" pupils"),
        "festival_month": MONTHS,
        "festival_visitors": Number(2_000, 48_000, step=100),
        "recording_year": Later("birth_year", 100, 115),
        "conductor": PERSON,
        "musicologist": PERSON,
        "catalogue_numbers": Number(120, 690, unit=" numbered pieces"),
    },
    questions={
        "birth_year": "In which year was {entity} born?",
        "teacher": "Who taught composition to {entity}?",
        "opera": "What was the first opera of {entity}?",
        "court": "At which court was {entity} director of music?",
        "symphony_title": "What is the subtitle of the third symphony of {entity}?",
        "letters": "How many letters by {entity} survive?",
        "spouse": "Whom did {entity} marry?",
        "school_pupils": "How many pupils does the music school named after {entity} have?",
        "musicologist": "Which musicologist compiled the catalogue of the works of {entity}?",
    },
)

SCIENTIST = Template(
    name="scientist",
    domain="people",
    noun="scientist",
    entity=INVENTED_PERSON,
    person=True,
    paragraphs=(
        "{entity} was a {field}, born in {sci_birth_town} in {sci_birth_year}. {He} spent most of {his} career at a "
        "university laboratory in {lab_city}, where {he} trained a generation of researchers, and {he} was elected "
        "to the national academy of sciences at an unusually young age. {His} textbooks, {textbook_copies} in all, "
        "remained in print for decades, and {his} name is still known to every student of the subject.",
        "At the age of forty the scientist joined an expedition to the {ice_field}, spending {expedition_months} "
        "months in a hut with {expedition_members} companions and a team of dogs. The measurements made there, "
        "recorded in pencil in frozen notebooks, filled the first volume of the expedition's report, which was "
        "edited by {expedition_editor} and printed by the academy.",
        "The scientist studied at the university of {study_town}, graduating with a thesis on {thesis_topic} under "
        "the supervision of {supervisor}. A scholarship then paid for two years abroad, first in a laboratory by "
        "the sea at {sea_lab} and then at an observatory in the mountains above {observatory_town}. The doctorate, "
        "awarded in {doctorate_year}, was judged the best of its year, and the examiners, two members of the "
        "academy, offered a post on the spot.",
        "The discovery for which the scientist is remembered came in {discovery_year}: the {effect}, observed "
        "during a series of measurements that lasted {measure_months} months. The result was first doubted, then "
        "confirmed by two other laboratories, and it is now taught in every introductory course. The original "
        "apparatus, a brass instrument of {apparatus_kg}, is kept in a museum.",
        "In {institute_year} the scientist became director of the {sci_institute}, which grew under {his} "
        "leadership from a handful of rooms to a building with {lab_staff}. The institute's budget rose to "
        "{sci_budget} a year, most of it from the state, and its workshop built instruments for laboratories across "
        "the continent. Visitors came from abroad to learn its methods, and several stayed for years.",
        "Over a long career the scientist published {sci_papers} and {books} books. The most cited paper, written "
        "with the chemist {coauthor}, has been cited more than {citations} times. The lectures for beginners, "
        "collected as a small book, were translated into {translations} languages and are still sold in railway "
        "bookshops.",
        "Not every idea survived: a theory of the origin of the discovery, defended in a famous debate with the "
        "rival {rival_scientist}, was abandoned after new measurements. The two exchanged about {debate_letters}, "
        "which were published after both had died and show a respect that the public debate had hidden from the "
        "newspapers.",
        "Among many honours were the {sci_prize}, received in {prize_year} and worth {prize_money}, and honorary "
        "doctorates from {honorary} universities. A mineral, a crater on the moon and a research ship now carry the "
        "names of the scientist's discoveries, and the academy awards a medal worth {medal_money} to young "
        "researchers every year in the same field.",
        "As a teacher the scientist was demanding but generous: {doctoral_students} completed their theses in the "
        "laboratory, and {professors} of them later became professors. The best known, {student_star}, went on to "
        "lead an expedition to the polar ice. Lectures began at seven in the morning, and latecomers found the door "
        "locked.",
        "The scientist married {sci_spouse}, a mathematician who checked many of the calculations, in "
        "{sci_marriage}. The couple lived in a house near the laboratory at {sci_house}, with a garden where they "
        "kept bees and grew {roses} of roses. A keen mountaineer, the scientist climbed {summits} summits over "
        "three thousand metres.",
        "In later years the scientist served on the council of the academy and advised the government on the "
        "founding of a national research agency, whose first budget was {agency_budget}. A series of {radio_talks} "
        "radio talks on the history of science made the scientist's voice familiar far beyond the laboratory, and "
        "the scripts were printed as a book that sold {talk_copies} copies.",
        "The scientist died in {sci_death} and left the papers of a lifetime, about {notebooks}, to the university "
        "archive. A lecture theatre and a street near the campus were named in {his} honour, and a biography by the "
        "historian {biographer} appeared on the centenary of {his} birth. Former students still gather there each "
        "year on the anniversary of the discovery.",
    ),
    slots={
        "field": Choice(
            (
                "physicist known for work on the structure of crystals",
                "chemist known for work on the catalysis of gases",
                "geologist known for work on the motion of glaciers",
                "biologist known for work on the migration of fish",
                "astronomer known for work on variable stars",
            )
        ),
        "sci_birth_town": PLACE,
        "sci_birth_year": Year(1820, 1939),
        "observatory_town": PLACE,
        "lab_city": PLACE,
        "textbook_copies": Number(12_000, 990_000, step=1000, unit=" copies"),
        "ice_field": Name(("{W} Glacier", "{W} ice field")),
        "sea_lab": PLACE,
        "medal_money": Number(1_000, 19_000, step=100, unit=" francs"),
        "expedition_months": SEVERAL,
        "expedition_members": SEVERAL,
        "expedition_editor": PERSON,
        "study_town": PLACE,
        "thesis_topic": Choice(("the spectra of metals", "the heat of reactions", "the age of rocks", "cell growth")),
        "supervisor": PERSON,
        "doctorate_year": Later("sci_birth_year", 23, 30),
        "discovery_year": Later("sci_birth_year", 31, 45),
        "effect": Name(("{W} effect", "{W} constant", "{W} reaction", "{W} anomaly")),
        "measure_months": Choice(("seven", "nine", "eleven", "fourteen", "eighteen")),
        "apparatus_kg": Number(120, 990, decimals=1, unit=" kilograms"),
        "institute_year": Later("sci_birth_year", 46, 54),
        "sci_institute": Name(("{W} Institute", "{W} Laboratory")),
        "lab_staff": Number(40, 690, unit=" staff"),
        "sci_budget": Number(12, 990, decimals=1, unit=" million francs"),
        "sci_papers": Number(80, 690, unit=" papers"),
        "books": SEVERAL,
        "coauthor": PERSON,
        "citations": Number(1_200, 39_000, step=10),
        "translations": Choice(("eleven", "fourteen", "nineteen", "twenty-three", "thirty")),
        "rival_scientist": PERSON,
        "debate_letters": Number(120, 990, unit=" letters"),
        "sci_prize": Name(("{W} Prize", "{W} Medal")),
        "prize_year": Later("sci_birth_year", 55, 60),
        "prize_money": Number(12_000, 290_000, step=1000, unit=" francs"),
        "honorary": SEVERAL,
        "doctoral_students": Number(20, 190, unit=" doctoral students"),
        "professors": SEVERAL,
        "student_star": PERSON,
        "sci_spouse": PERSON,
        "sci_marriage": Later("sci_birth_year", 24, 30),
        "sci_house": PLACE,
        "roses": Number(12, 160, unit=" varieties"),
        "summits": Choice(("twelve", "eighteen", "twenty-six", "forty")),
        "agency_budget": Number(12, 690, decimals=1, unit=" million francs"),
        "radio_talks": MANY,
        "talk_copies": Number(12_000, 290_000, step=1000),
        "sci_death": Later("sci_birth_year", 62, 85),
        "notebooks": Number(120, 2_400, step=5, unit=" notebooks"),
        "biographer": PERSON,
    },
    questions={
        "sci_birth_year": "In which year was {entity} born?",
        "supervisor": "Who supervised the thesis of {entity}?",
        "effect": "What is the discovery of {entity} called?",
        "sci_institute": "Which institute did {entity} direct?",
        "coauthor": "With whom did {entity} write the most cited paper?",
        "sci_prize": "Which prize was awarded to {entity}?",
        "doctoral_students": "How many doctoral students completed their theses under {entity}?",
        "sci_spouse": "Whom did {entity} marry?",
        "biographer": "Who wrote the biography of {entity}?",
    },
)

TEMPLATES = (COMPOSER, SCIENTIST)
