"""Domain ``geography``: a city and an island. Questions are marked with *.

* ``city`` (11 paragraphs, 9 questions): overview naming the city (population*, province, river, old church); health
  and schools (hospitals, conservatory, baths); history (first charter, town rights*, great fire, a merchant);
  economy (largest private employer*, output, port, unemployment); transport (tram network's opening year* and
  length, station, airport); culture (university founding year and students*, museum, festival, opera house); sport
  (seats of the football ground*, rowing race, arena); climate (January* and July temperatures, rainfall, last
  freeze); government (council, mayor*, largest district); media (local newspaper*, library, twin town); landmarks
  (cathedral tower, park, botanical garden). Later paragraphs say "the city".
* ``island`` (11 paragraphs, 9 questions): overview naming the island (area*, residents, distance from the mainland,
  ferry port, oldest village); food (dairy, bakery); highest point (its height*, a lake); history (first written
  mention*, a raid, a watchtower); economy (fishing, summer visitors*, cannery); ferry (crossing time, ferry
  company*, cars, road); villages (church consecrated in*, hamlet, cliff path); nature reserve (share of the land,
  seabird pairs*, warden); climate (February and August temperatures, hours of sunshine*, rain); culture (regatta,
  museum, the painter*); council and energy (wind farm, cable). Later paragraphs say "the island".
"""

from __future__ import annotations

from curation.sources.controlled.template import (
    FEW,
    MONTHS,
    PERSON,
    PLACE,
    SEVERAL,
    Choice,
    Name,
    Number,
    Template,
    Year,
)

CITY = Template(
    name="city",
    domain="geography",
    noun="city",
    entity=Name(("{W}",)),
    paragraphs=(
        "{entity} is {city_kind} city in the {direction} of the country, with about {population} inhabitants in the "
        "city proper. It is the seat of the province of {province} and lies on the {bank} bank of the river "
        "{river}, where the valley opens onto a wide plain. The old town grew up around a market square and the "
        "{old_church}, while newer districts spread along the roads that lead out of the valley towards the hills.",
        "The city has {hospitals} hospitals, the largest of which, the {hospital}, has {city_beds} and a helicopter "
        "landing pad on its roof. Some {pupils} pupils attend the schools of the city, and a conservatory of music, "
        "founded by {conservatory_founder}, trains singers and instrumentalists from across the province. The "
        "public baths by the river, with a pool of {pool_m} in length, are among the oldest in the country.",
        "The settlement is first mentioned in a charter of {first_record}, when a bishop granted the right to hold "
        "a weekly market at the ford. Town rights followed in {town_rights}, and a stone wall with {gates} gates "
        "was built soon after. A great fire in {fire_year} destroyed much of the wooden old town, and the merchant "
        "{merchant} paid for the rebuilding of the town hall in brick. The population grew quickly once the railway "
        "arrived and the first factories opened beside the river.",
        "Today the economy rests on {sector_a}, {sector_b} and a growing service sector. The largest private "
        "employer is the {employer}, which employs about {employer_staff} people at its works beside the river. The "
        "output of the metropolitan area reached {output} last year, and the river port handles about {port_tonnes} "
        "of freight a year. Unemployment stood at {unemployment} at the last count, a little below the national "
        "average, although it remains higher in the old industrial districts.",
        "Public transport is run by a municipal company. The tram network opened in {tram_year} and now has "
        "{tram_lines} lines covering {tram_km} of track. The main railway station, {station}, stands at the edge of "
        "the old town and has direct trains to the capital every hour. The airport lies {airport_km} from the "
        "centre and handles around {airport_passengers} passengers a year, most of them on flights to the south.",
        "The university was founded in {university_year} and today has about {students} students in {faculties} "
        "faculties. The best-known museum is the {museum}, housed in a former granary, which holds a collection of "
        "about {museum_items} objects. Every {festival_month} the city holds the {festival}, when the squares fill "
        "with stalls and music. The opera house, opened in {opera_year}, seats {opera_seats} and has its own ballet "
        "company.",
        "The main football team plays in the {division} division at a ground with {ground_seats} seats on the "
        "western edge of town. A traditional rowing race on the river has been held every {race_month} since "
        "{race_year}, and the city marathon follows a route along both banks. An indoor arena for {arena_seats} "
        "spectators, designed by the architect {arena_architect}, hosts basketball and handball matches as well as "
        "concerts in the winter months.",
        "The climate is {climate}, with warm summers and cold winters. The average temperature is {jan_temp} in "
        "January and {jul_temp} in July, the warmest month. The city receives about {rainfall} of rain a year, most "
        "of it in autumn, and fog often lies in the valley on winter mornings. Snow covers the ground for "
        "{snow_weeks} weeks in an average year, and the river last froze over in the winter of {river_froze}.",
        "The city is governed by a council of {council_seats} members elected every four years, and the mayor is "
        "{mayor}, who took office after a close election. The town hall on the market square dates from the "
        "rebuilding after the fire. The city is divided into {districts} districts, the largest of which, "
        "{district}, has about {district_pop} residents and its own weekly market and swimming baths.",
        "The local newspaper, the {newspaper}, has appeared daily since {newspaper_year} and sells about "
        "{newspaper_copies} copies. A regional television station broadcasts from a studio near the station, and "
        "the city library, with {library_books} volumes, is the largest in the province. The city is twinned with "
        "{twin}, a port on the coast, whose mayor visits every spring with a delegation of schoolchildren.",
        "The tallest building is the tower of the cathedral, {cathedral_m} high, which was completed in "
        "{cathedral_year} after two centuries of work. A park of {park_ha} on the former ramparts rings the old "
        "town, and the botanical garden, laid out by {gardener}, is known for its glasshouses of tropical plants. "
        "From the hill above the river, the view reaches as far as the {mountains} on clear days.",
    ),
    slots={
        "city_kind": Choice(("a historic", "an industrial", "a university", "a cathedral", "a market", "a river")),
        "direction": Choice(("north", "south", "east", "west", "north-east", "south-west", "north-west")),
        "population": Number(120_000, 980_000, step=1000),
        "province": PLACE,
        "bank": Choice(("northern", "southern", "eastern", "western")),
        "river": PLACE,
        "old_church": Name(("{W} Church", "{W} Abbey")),
        "river_froze": Year(1800, 1999),
        "hospitals": FEW,
        "hospital": Name(("{W} Hospital", "{W} Clinic")),
        "city_beds": Number(300, 2_900, step=5, unit=" beds"),
        "pupils": Number(14_000, 99_000, step=100),
        "conservatory_founder": PERSON,
        "pool_m": Number(250, 990, decimals=1, unit=" metres"),
        "first_record": Year(850, 1199),
        "town_rights": Year(1200, 1449),
        "gates": FEW,
        "fire_year": Year(1450, 1699),
        "merchant": PERSON,
        "sector_a": Choice(("engineering", "chemicals", "textiles", "food processing", "printing", "steel")),
        "sector_b": Choice(("logistics", "insurance", "software", "tourism", "retail", "health care")),
        "employer": Name(("{W} Steelworks", "{W} Textile Mills", "{W} Brewery", "{W} Glassworks", "{W} Paper Mills")),
        "employer_staff": Number(2_100, 19_900, step=100),
        "output": Number(40, 990, step=5, decimals=1, unit=" billion euros"),
        "port_tonnes": Number(11, 300, decimals=1, unit=" million tonnes"),
        "unemployment": Number(21, 149, decimals=1, unit=" percent"),
        "tram_year": Year(1860, 1999),
        "tram_lines": SEVERAL,
        "tram_km": Number(21, 320, unit=" kilometres"),
        "station": Name(("{W} Station", "{W} Central")),
        "airport_km": Number(60, 480, decimals=1, unit=" kilometres"),
        "airport_passengers": Number(11, 190, decimals=1, unit=" million"),
        "university_year": Year(1350, 1899),
        "students": Number(8_000, 64_000, step=100),
        "faculties": SEVERAL,
        "museum": Name(("Museum of {W} Art", "{W} Museum", "{W} Collection")),
        "museum_items": Number(12_000, 480_000, step=1000),
        "festival_month": MONTHS,
        "festival": Name(("{W} Festival", "Festival of {W}")),
        "opera_year": Year(1700, 1999),
        "opera_seats": Number(600, 2_400, step=10, unit=" people"),
        "division": Choice(("top", "second", "third")),
        "ground_seats": Number(8_000, 62_000, step=250),
        "race_month": MONTHS,
        "race_year": Year(1800, 1979),
        "arena_seats": Number(3_000, 19_000, step=50),
        "arena_architect": PERSON,
        "climate": Choice(("continental", "temperate", "humid continental", "mild and damp")),
        "jan_temp": Number(-90, 60, decimals=1, unit=" °C"),
        "jul_temp": Number(160, 290, decimals=1, unit=" °C"),
        "rainfall": Number(380, 1400, step=5, unit=" millimetres"),
        "snow_weeks": FEW,
        "council_seats": Choice(("forty-one", "forty-nine", "fifty-five", "sixty-one", "seventy-one")),
        "mayor": PERSON,
        "districts": SEVERAL,
        "district": PLACE,
        "district_pop": Number(21_000, 99_000, step=500),
        "newspaper": Name(("{W} Courier", "{W} Herald", "{W} Gazette")),
        "newspaper_year": Year(1780, 1949),
        "newspaper_copies": Number(12_000, 98_000, step=500),
        "library_books": Number(210_000, 2_900_000, step=10_000),
        "twin": PLACE,
        "cathedral_m": Number(610, 1590, decimals=1, unit=" metres"),
        "cathedral_year": Year(1300, 1599),
        "park_ha": Number(12, 190, unit=" hectares"),
        "gardener": PERSON,
        "mountains": Name(("{W} Mountains", "{W} Hills")),
    },
    questions={
        "population": "How many people live in the city proper of {entity}?",
        "town_rights": "In which year did {entity} receive town rights?",
        "employer": "Which company is the largest private employer in {entity}?",
        "tram_year": "In which year did the {entity} tram network open?",
        "students": "How many students does the university of {entity} have?",
        "ground_seats": "How many seats does the football ground of {entity} have?",
        "jan_temp": "What is the average January temperature in {entity}?",
        "mayor": "Who is the mayor of {entity}?",
        "newspaper": "What is the name of the local newspaper of {entity}?",
    },
)

ISLAND = Template(
    name="island",
    domain="geography",
    noun="island",
    entity=Name(("{W}",)),
    paragraphs=(
        "{entity} is a {island_shape} island in the {sea_part} part of the archipelago, with an area of {area} and "
        "about {island_pop}. It lies {mainland_km} off the mainland coast and is reached by ferry from the harbour "
        "town of {ferry_port}. Its interior rises to a ridge of bare granite, {ridge_km} long, while the coasts are "
        "lined with coves, dunes and small fishing villages, the oldest of them {old_village}, that fill with "
        "visitors in summer.",
        "The island is known for its smoked fish and for a dark rye bread baked in stone ovens. A dairy on the "
        "eastern farms keeps about {cows} and makes a hard cheese that is aged for {cheese_months} months in a cave "
        "below the cliffs. The bakery in the main village, run by {baker}, sends about {loaves} to the mainland "
        "every week on the morning ferry, and a smokehouse by the quay sells fish to the visitors.",
        "The highest point is {peak}, a rounded summit of {peak_m} above the sea, from which the whole coastline "
        "can be seen on a clear day. The ridge is made of granite that cooled {rock_age} years ago, and its slopes "
        "are covered with heather, juniper and stunted pines. A freshwater lake of {lake_ha} fills a hollow below "
        "the summit and supplies most of the drinking water, topped up in dry summers by a tanker from the "
        "mainland.",
        "Traces of a Bronze Age settlement have been found on the southern cape, but the first written mention "
        "dates from {first_mention}, when the island was given to a monastery on the mainland. The monks built a "
        "chapel and a mill, and their records list {early_families} paying rent in grain and fish. In {raid_year} "
        "raiders burned the harbour, and the ruined watchtower on the headland of {tower} recalls the long "
        "centuries of coastal defence.",
        "Fishing was the main livelihood until the middle of the last century, and the harbour still lands about "
        "{fish_tonnes} of fish a year, mostly herring and cod. Tourism has since become the largest source of "
        "income: the island receives around {visitors} visitors each summer, who stay in guesthouses and on "
        "campsites. The largest employer is the {cannery}, which processes and smokes fish for export and employs "
        "{cannery_staff} in the season.",
        "The ferry crossing takes about {ferry_minutes}, and in summer boats leave every hour from dawn until late "
        "evening. The ferry company, {ferry_company}, has run the route since {ferry_year} and carries some "
        "{ferry_cars} cars a year. A single road of {road_km} links the harbour with the villages, and a small "
        "airstrip on the northern plain takes light aircraft when the weather allows.",
        "The main village, {main_village}, sits around the harbour and has a school, a doctor's practice and the "
        "only supermarket. Its whitewashed church, consecrated in {church_year}, has a wooden ceiling painted with "
        "ships and stars. Smaller hamlets are scattered along the western shore, and the most remote of them, "
        "{hamlet}, can only be reached on foot along a cliff path of {path_km}.",
        "About {reserve_share} of the land is a nature reserve, created in {reserve_year} to protect the dunes and "
        "the breeding grounds of seabirds. Some {bird_pairs} of puffins, terns and gannets nest on the northern "
        "cliffs each spring, and grey seals haul out on the skerries off the eastern point. The reserve is managed "
        "by the ornithologist {warden}, who counts the colonies every June with a team of volunteers.",
        "The climate is mild and windy, tempered by the sea: frost is rare, and the average temperature in "
        "February, the coldest month, is {feb_temp}. Summers are cool, with an average of {aug_temp} in August. The "
        "island receives {sunshine_hours} hours of sunshine a year, more than the mainland, and about {island_rain} "
        "of rain. Autumn gales sometimes stop the ferries for several days at a time.",
        "Every {regatta_month} the island holds a regatta, followed by a fish market and a dance in the harbour "
        "sheds. The local museum, opened in {museum_year} in a former customs house, shows the tools of the "
        "fishermen and {wreck_models} of ships wrecked on the reefs. The painter {painter} lived in a cottage above "
        "the harbour for many years, and those pictures of the cliffs made the island known far beyond the "
        "archipelago.",
        "The island council has {island_council} members and meets in the old schoolhouse. A wind farm of "
        "{turbines} off the southern coast has produced most of the electricity since it opened, and a cable of "
        "{cable_km} links the local grid to the mainland. Plans for a bridge have been discussed for decades, but "
        "the residents have twice voted to keep the ferry.",
    ),
    slots={
        "island_shape": Choice(("long, narrow", "rocky", "low, sandy", "hilly", "crescent-shaped", "wooded")),
        "sea_part": Choice(("northern", "southern", "outer", "inner", "western", "eastern")),
        "area": Number(120, 2_900, decimals=1, unit=" square kilometres"),
        "island_pop": Number(800, 48_000, step=100, unit=" permanent residents"),
        "mainland_km": Number(40, 390, decimals=1, unit=" kilometres"),
        "ferry_port": PLACE,
        "old_village": PLACE,
        "ridge_km": Number(30, 290, decimals=1, unit=" kilometres"),
        "cows": Number(120, 1_400, step=5, unit=" cows"),
        "cheese_months": SEVERAL,
        "baker": PERSON,
        "loaves": Number(800, 9_900, step=10, unit=" loaves"),
        "peak": Name(("{W} Peak", "Mount {W}", "{W} Fell")),
        "peak_m": Number(180, 1_490, unit=" metres"),
        "rock_age": Number(280, 990, unit=" million"),
        "lake_ha": Number(14, 380, unit=" hectares"),
        "first_mention": Year(900, 1249),
        "early_families": Number(12, 140, unit=" families"),
        "raid_year": Year(1250, 1599),
        "tower": PLACE,
        "fish_tonnes": Number(1_200, 38_000, step=100, unit=" tonnes"),
        "visitors": Number(12_000, 390_000, step=1000),
        "cannery": Name(("{W} Cannery", "{W} Smokehouse", "{W} Fish Company")),
        "cannery_staff": Number(40, 900, step=5, unit=" people"),
        "ferry_minutes": Number(25, 190, unit=" minutes"),
        "ferry_company": Name(("{W} Ferries", "{W} Line", "{W} Shipping")),
        "ferry_year": Year(1850, 1989),
        "ferry_cars": Number(8_000, 160_000, step=500),
        "road_km": Number(60, 480, decimals=1, unit=" kilometres"),
        "main_village": PLACE,
        "church_year": Year(1200, 1699),
        "hamlet": PLACE,
        "path_km": Number(15, 190, decimals=1, unit=" kilometres"),
        "reserve_share": Number(120, 680, decimals=1, unit=" percent"),
        "reserve_year": Year(1880, 2019),
        "bird_pairs": Number(800, 62_000, step=100, unit=" pairs"),
        "warden": PERSON,
        "feb_temp": Number(-40, 90, decimals=1, unit=" °C"),
        "aug_temp": Number(130, 270, decimals=1, unit=" °C"),
        "sunshine_hours": Number(1_400, 2_600, step=5),
        "island_rain": Number(500, 1_300, step=5, unit=" millimetres"),
        "regatta_month": Choice(("May", "June", "July", "August")),
        "museum_year": Year(1870, 2009),
        "wreck_models": Number(30, 260, unit=" models"),
        "painter": PERSON,
        "island_council": SEVERAL,
        "turbines": Number(12, 190, unit=" turbines"),
        "cable_km": Number(80, 900, decimals=1, unit=" kilometres"),
    },
    questions={
        "area": "What is the area of the island of {entity}?",
        "peak_m": "How high is the highest point of {entity}?",
        "first_mention": "In which year is {entity} first mentioned in writing?",
        "visitors": "How many visitors does {entity} receive each summer?",
        "ferry_company": "Which company runs the ferry to {entity}?",
        "church_year": "In which year was the church in the main village of {entity} consecrated?",
        "bird_pairs": "How many pairs of seabirds nest on {entity}?",
        "sunshine_hours": "How many hours of sunshine does {entity} receive a year?",
        "painter": "Which painter lived above the harbour of {entity}?",
    },
)

TEMPLATES = (CITY, ISLAND)
